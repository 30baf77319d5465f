package cron

import (
	"time"
)

const (
	// farPast and farFuture stand for unbounded zone periods; far beyond any real instant, yet
	// small enough that adding an offset cannot overflow.
	farPast   int64 = -1 << 60
	farFuture int64 = 1 << 60
	// lookbackSeconds bounds how far apart two periods can be and still overlap on the wall
	// clock: offsets differ by far less than this.
	lookbackSeconds = 4 * secondsPerDay
	// minSupportedUnix and maxSupportedUnix are 0001-01-01 and 9999-12-31T23:59:59 UTC: give
	// or take an offset, the range of Next.
	minSupportedUnix int64 = -62135596800
	maxSupportedUnix int64 = 253402300799
)

// period is a stretch of instants [start, end) with one UTC offset. Its wall-clock ("civil")
// range is [start+offset, end+offset).
type period struct {
	start, end int64
	offset     int64
	isDST      bool
}

func (p period) civilStart() int64 {
	if p.start == farPast {
		return farPast
	}
	return p.start + p.offset
}

func (p period) civilEnd() int64 {
	if p.end == farFuture {
		return farFuture
	}
	return p.end + p.offset
}

// periodAt returns the zone period containing instant t (Unix seconds), from the Location's own
// lookup (ZoneBounds). Beyond its last listed transition Go derives periods from the zone's
// rule and may split them at year starts (same offset on both sides, harmless); in a leap year
// it can report an end at or before t, which is patched to the next period's start.
func periodAt(location *time.Location, t int64) period {
	p := rawPeriodAt(location, t)
	if p.end <= t {
		next := rawPeriodAt(location, t+secondsPerDay)
		if next.start > t && next.start <= t+secondsPerDay {
			p.end = next.start
		} else {
			p.end = t + 1
		}
	}
	if p.start > t {
		p.start = t
	}
	return p
}

func rawPeriodAt(location *time.Location, t int64) period {
	instant := time.Unix(t, 0).In(location)
	_, offset := instant.Zone()
	start, end := instant.ZoneBounds()
	p := period{start: farPast, end: farFuture, offset: int64(offset), isDST: instant.IsDST()}
	if !start.IsZero() {
		p.start = start.Unix()
	}
	if !end.IsZero() {
		p.end = end.Unix()
	}
	return p
}

// maxCivilEndBefore returns the latest wall-clock time reached by any period ending at or
// before instant start (farPast if none): wall times below it already existed before start.
func maxCivilEndBefore(location *time.Location, start int64) int64 {
	best := farPast
	for t, hops := start, 0; t != farPast && hops < 16; hops++ {
		q := periodAt(location, t-1)
		best = max(best, q.civilEnd())
		if q.start == farPast || q.start <= start-lookbackSeconds {
			break
		}
		t = q.start
	}
	return best
}

// minCivilStartFrom returns the earliest wall-clock time reached by any period starting at or
// after instant end (farFuture if none): wall times at or above it exist again later.
func minCivilStartFrom(location *time.Location, end int64) int64 {
	best := farFuture
	for t, hops := end, 0; t != farFuture && hops < 16; hops++ {
		q := periodAt(location, t)
		best = min(best, q.civilStart())
		if q.end == farFuture || q.end >= end+lookbackSeconds {
			break
		}
		t = q.end
	}
	return best
}
