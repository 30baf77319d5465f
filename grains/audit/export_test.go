package audit

// SetMaxRecordsForTest lowers the bounded log's cap and returns its restore.
func SetMaxRecordsForTest(n int) (restore func()) {
	old := maxRecords
	maxRecords = n
	return func() { maxRecords = old }
}
