//go:build !linux

package persistence

import "os"

// datasync writes f's data back to disk (fsync: this platform has no fdatasync in package
// syscall).
func datasync(f *os.File) error { return f.Sync() }
