package persistence

import (
	"os"
	"syscall"
)

// datasync writes f's data back to disk, with the metadata needed to read it (fdatasync), also
// the pages written through a shared mapping of the file.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
