//go:build !race

package persistence

// raceEnabled: the race detector multiplies memory use, so RSS bounds are not checked.
const raceEnabled = false
