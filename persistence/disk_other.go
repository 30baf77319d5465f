//go:build !unix

package persistence

import "errors"

// FreeBytes is not implemented on this platform; set Options.MinFreeBytes to 0 there.
func FreeBytes(dir string) (uint64, error) { return 0, errors.ErrUnsupported }

// directoryLockHeld cannot tell on this platform.
func directoryLockHeld(string) bool { return false }
