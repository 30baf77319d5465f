package chaos

// TB is what the functions that start and stop silo processes use of a test: *testing.T and
// *testing.B satisfy it, and so does a command that runs them outside go test (chaos/cmd/chaos).
// Fatal and Fatalf must not return (a test's stop its goroutine; a command may panic and
// recover where it runs its cleanups); Skipf, for a machine that cannot do what was asked,
// must not return either. Cleanup's functions run last added first when the run ends.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}
