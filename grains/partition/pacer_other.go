//go:build !unix

package partition

import "time"

// processCPU cannot be read on this platform: the pacer never turns busy.
func processCPU() time.Duration { return 0 }
