package cron

import "time"

const (
	// maxPeriodHops bounds the walk over zone periods in one Next call; real zones need a few.
	maxPeriodHops = 4096
	// jumpMarginSeconds exceeds any UTC offset: the instants whose wall time is a civil time c
	// lie within this distance of c read as UTC.
	jumpMarginSeconds = 27 * 3600
)

// Next returns the first occurrence strictly after the instant after (occurrences are whole
// seconds from year 1 on), in the schedule's location, and false if there is none up to the
// end of year 9999 local time.
//
// Occurrences are defined on the wall clock: each matching local time fires at the instant it
// denotes, or, when it denotes none (a gap) or several (a repeat), at the instants the options
// choose. Next walks the zone's periods of constant offset from the one containing after;
// within a period wall time and instants move together, so one field-wise search per period
// finds its first occurrence, and periods without one are skipped in a single jump.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	if s.never {
		return time.Time{}, false
	}
	threshold := max(after.Unix()+1, minSupportedUnix)
	if threshold > maxSupportedUnix+jumpMarginSeconds { // past 9999-12-31 in every zone
		return time.Time{}, false
	}
	firstOnly, lastOnly := s.passSelection()
	gapShift := s.options.Gap == GapShift

	p := periodAt(s.location, threshold)
	for hops := 0; hops < maxPeriodHops; hops++ {
		gapCheck := gapShift && p.start != farPast && p.start >= threshold
		previousEnd := farPast // the latest wall time reached before this period
		if (gapCheck || firstOnly) && p.start != farPast {
			previousEnd = maxCivilEndBefore(s.location, p.start)
		}
		// Wall times skipped just before this period fire at its first instant.
		if gapCheck && previousEnd < p.civilStart() {
			if m, ok := s.spec.nextMatch(previousEnd); ok && m < p.civilStart() {
				return s.instant(p.start)
			}
		}

		low := max(threshold, p.start) + p.offset
		if firstOnly {
			low = max(low, previousEnd) // repeated wall times fire in the earlier pass
		}
		high := p.civilEnd()
		if lastOnly && p.end != farFuture {
			high = min(high, minCivilStartFrom(s.location, p.end)) // ...or in the later pass
		}
		m, found := s.spec.nextMatch(low)
		if found && low < high && m < high {
			return s.instant(m - p.offset)
		}
		if p.end == farFuture {
			return time.Time{}, false
		}

		// Later periods reach wall times from futureLow up, and nothing matches in [low, m).
		futureLow := min(minCivilStartFrom(s.location, p.end), p.civilEnd())
		if futureLow >= low {
			if !found {
				return time.Time{}, false
			}
			if jump := m - jumpMarginSeconds; jump > p.end {
				p = periodAt(s.location, jump) // earlier periods end before wall time m
				continue
			}
		}
		p = periodAt(s.location, p.end)
	}
	return time.Time{}, false
}

// passSelection says which passes of a repeated wall time fire: the first only, the last
// only, or (both false) every pass.
func (s *Schedule) passSelection() (firstOnly, lastOnly bool) {
	switch s.options.Repeat {
	case RepeatFirst:
		return true, false
	case RepeatLast:
		return false, true
	case RepeatBoth:
		return false, false
	default:
		return !s.spec.interval, false
	}
}

func (s *Schedule) instant(unix int64) (time.Time, bool) {
	at := time.Unix(unix, 0).In(s.location)
	if at.Year() > maxYear {
		return time.Time{}, false
	}
	return at, true
}
