package persistence

import "testing"

func TestNextLoggedTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		last, wall, want int64
	}{
		{"first batch takes the wall clock", 0, 1_000, 1_000},
		{"wall clock ahead", 1_000, 5_000, 5_000},
		{"same microsecond moves one past", 1_000, 1_000, 1_001},
		{"wall clock behind (slower silo after failover)", 9_000, 1_000, 9_001},
		{"wall clock one ahead", 1_000, 1_001, 1_001},
		{"negative wall clock", 0, -5, 1},
	} {
		if got := NextLoggedTime(tc.last, tc.wall); got != tc.want {
			t.Errorf("%s: NextLoggedTime(%d, %d) = %d, want %d", tc.name, tc.last, tc.wall, got, tc.want)
		}
	}
}

func TestNextLoggedTimeIsStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	last := int64(0)
	// A wall clock that jumps back and forth.
	for i, wall := range []int64{100, 100, 50, 200, 199, 199, 1_000, 3} {
		next := NextLoggedTime(last, wall)
		if next <= last || next < wall {
			t.Fatalf("step %d: NextLoggedTime(%d, %d) = %d", i, last, wall, next)
		}
		last = next
	}
}
