package persistence

import (
	"sync"
	"time"

	"github.com/orreryhq/orrery"
)

// FreeSpaceRecheck is how long a free-disk check's result is reused: the floor is read from
// the file system (a statfs) at most this often, not once per command and apply. A disk that
// fills within it takes at most that much more work, which the floor's margin of a few
// memtables covers.
const FreeSpaceRecheck = 100 * time.Millisecond

// checkFreeSpace refuses with Unavailable when the file system holding dir has less free space
// than opts.MinFreeBytes. Refusing new work is recoverable; Badger finding the disk full during
// a memtable flush is not (SIGBUS, the whole silo dies).
func checkFreeSpace(dir string, opts Options) error {
	if opts.MinFreeBytes == 0 {
		return nil
	}
	free, err := opts.FreeBytesFunc(dir)
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "store %s: cannot read free disk space", dir)
	}
	if free < opts.MinFreeBytes {
		return orrery.Errorf(orrery.CodeUnavailable,
			"store %s refuses writes: %d bytes free on its disk, below the floor of %d bytes",
			dir, free, opts.MinFreeBytes)
	}
	return nil
}

// freeSpaceCheck is checkFreeSpace with its result reused for FreeSpaceRecheck.
type freeSpaceCheck struct {
	dir  string
	opts Options

	mu      sync.Mutex
	checked time.Time // zero: never
	err     error
}

func (f *freeSpaceCheck) check() error {
	if f.opts.MinFreeBytes == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); f.checked.IsZero() || now.Sub(f.checked) >= FreeSpaceRecheck {
		f.err, f.checked = checkFreeSpace(f.dir, f.opts), now
	}
	return f.err
}
