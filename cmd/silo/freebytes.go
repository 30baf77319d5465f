package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/orreryhq/orrery/persistence"
)

// freeBytesFileEnv is the environment variable, for testing only, that names a file the silo
// reads its store disk's free space from while the file exists (a decimal byte count; the disk's
// own figure otherwise), at each free-space check: the chaos harness fills the disk by writing 0
// there, and empties it by removing the file. No deployment should set it.
const freeBytesFileEnv = "ORRERY_FREE_BYTES_FILE"

// freeBytesFrom is a persistence.Options.FreeBytesFunc that reads path while it exists and the
// disk (persistence.FreeBytes) otherwise.
func freeBytesFrom(path string) func(dir string) (uint64, error) {
	return func(dir string) (uint64, error) {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return persistence.FreeBytes(dir)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", freeBytesFileEnv, err)
		}
		free, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%s: want a byte count: %w", freeBytesFileEnv, path, err)
		}
		return free, nil
	}
}
