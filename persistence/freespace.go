package persistence

import "github.com/orreryhq/orrery"

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
