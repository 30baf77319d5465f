// Package chaos owns process-level testing of silos: building the silo binary, starting real
// silo processes on loopback with free ports and temp data directories, killing them with
// SIGKILL or stopping them with SIGTERM, and making sure every process a test started is gone
// when the test ends, even on failure.
package chaos
