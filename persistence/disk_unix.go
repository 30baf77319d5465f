//go:build unix

package persistence

import (
	"errors"
	"os"
	"syscall"
)

// FreeBytes is the space available to an unprivileged writer on the file system holding dir.
func FreeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// directoryLockHeld reports whether another open file description holds the flock Badger takes
// on dir. It takes and drops the lock itself when it is free.
func directoryLockHeld(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	fd := int(f.Fd())
	err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}
