package listing

// SetMaxScannedForTest lowers the scan bound of a filtered page and returns its restore.
func SetMaxScannedForTest(n int) (restore func()) {
	old := maxScanned
	maxScanned = n
	return func() { maxScanned = old }
}
