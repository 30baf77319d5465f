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
	return belowFloor(dir, free, err, opts.MinFreeBytes)
}

// belowFloor is the error of a disk with free bytes (or the error reading them, err) against
// floor: nil when free is at least floor.
func belowFloor(dir string, free uint64, err error, floor uint64) error {
	if err != nil {
		return orrery.Wrap(orrery.CodeUnavailable, err, "store %s: cannot read free disk space", dir)
	}
	if free < floor {
		return orrery.Errorf(orrery.CodeUnavailable,
			"store %s refuses writes: %d bytes free on its disk, below the floor of %d bytes",
			dir, free, floor)
	}
	return nil
}

// freeSpaceCheck reads the free space of dir's disk at most every FreeSpaceRecheck and judges
// it against the floor and the drain floor.
type freeSpaceCheck struct {
	dir  string
	opts Options

	mu      sync.Mutex
	checked time.Time // zero: never
	free    uint64
	err     error // reading the free space
}

// read returns the free space as of at most FreeSpaceRecheck ago.
func (f *freeSpaceCheck) read() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); f.checked.IsZero() || now.Sub(f.checked) >= FreeSpaceRecheck {
		f.free, f.err = f.opts.FreeBytesFunc(f.dir)
		f.checked = now
	}
	return f.free, f.err
}

// check judges the free space against Options.MinFreeBytes.
func (f *freeSpaceCheck) check() error {
	if f.opts.MinFreeBytes == 0 {
		return nil
	}
	free, err := f.read()
	return belowFloor(f.dir, free, err, f.opts.MinFreeBytes)
}

// checkDrain judges the free space against the drain floor, half of Options.MinFreeBytes.
func (f *freeSpaceCheck) checkDrain() error {
	if f.opts.MinFreeBytes == 0 {
		return nil
	}
	free, err := f.read()
	return belowFloor(f.dir, free, err, f.opts.MinFreeBytes/2)
}
