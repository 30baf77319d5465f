package cron

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The independent oracle: for random expressions and every offset change of real zones from
// 2000 to 2040, walk every wall-clock minute (or second) around the change, find the instants
// each matching wall time denotes by reading every instant of the window through the time
// package, apply the DST rule from its definition, and compare the result with what Next
// enumerates. It knows nothing of the production parser or evaluator (oracle_gen_test.go).

const oracleSeed = 20240611

var oracleZones = []string{
	"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago",
	"Asia/Kolkata", "Pacific/Apia", "UTC",
}

// oracleBudget sizes a run: expressions per transition and the compared window.
type oracleBudget struct {
	minuteExpressions, secondExpressions int
	minuteWindow, secondWindow           time.Duration
}

func oracleBudgetFromEnv() oracleBudget {
	if os.Getenv("ORRERY_CRON_ORACLE_FULL") == "1" {
		return oracleBudget{minuteExpressions: 200, secondExpressions: 30, minuteWindow: 6 * time.Hour, secondWindow: 2 * time.Hour}
	}
	return oracleBudget{minuteExpressions: 16, secondExpressions: 4, minuteWindow: 3 * time.Hour, secondWindow: 40 * time.Minute}
}

// anchor is an instant to test around: an offset change, or a plain instant in a zone without
// any, with the offsets in force just before and at it.
type anchor struct {
	at                   time.Time
	offsetBefore, offset int
}

// offsetChanges finds every offset change of location in [from, to) by reading offsets hourly
// and bisecting to the second.
func offsetChanges(location *time.Location, from, to time.Time) []anchor {
	offsetAt := func(unix int64) int {
		_, offset := time.Unix(unix, 0).In(location).Zone()
		return offset
	}
	var changes []anchor
	previous := offsetAt(from.Unix())
	for t := from.Unix() + 3600; t < to.Unix(); t += 3600 {
		current := offsetAt(t)
		if current == previous {
			continue
		}
		low, high := t-3600, t // offset(low) = previous, offset(high) = current
		for high-low > 1 {
			mid := low + (high-low)/2
			if offsetAt(mid) == previous {
				low = mid
			} else {
				high = mid
			}
		}
		changes = append(changes, anchor{at: time.Unix(high, 0).In(location), offsetBefore: previous, offset: current})
		previous = current
	}
	return changes
}

// anchorsFor returns the offset changes from 2000 to 2040, or, for a zone without any, two
// instants a year at the times other zones change.
func anchorsFor(location *time.Location) []anchor {
	from := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC)
	if changes := offsetChanges(location, from, to); len(changes) > 0 {
		return changes
	}
	var anchors []anchor
	for year := 2000; year <= 2040; year++ {
		for _, at := range []time.Time{
			time.Date(year, 3, 12, 2, 0, 0, 0, location),
			time.Date(year, 11, 5, 1, 30, 0, 0, location),
		} {
			_, offset := at.Zone()
			anchors = append(anchors, anchor{at: at, offsetBefore: offset, offset: offset})
		}
	}
	return anchors
}

// oracleCase is one (expression, anchor) comparison.
type oracleCase struct {
	expr     *oracleExpr
	options  Options
	location *time.Location
	anchor   anchor
	window   time.Duration // compare occurrences in [anchor-window, anchor+window]
}

// oracleExercise records whether a case met the DST rules inside its compared window.
type oracleExercise struct{ gap, repeat bool }

// oracleOccurrences computes the case's occurrences by brute force.
func oracleOccurrences(c oracleCase) ([]int64, oracleExercise) {
	step := int64(60)
	if c.expr.withSeconds {
		step = 1
	}
	jump := int64(c.anchor.offset - c.anchor.offsetBefore)
	if jump < 0 {
		jump = -jump
	}
	margin := jump + 300 // a wall time's instants lie within the jump of each other
	compareFrom := c.anchor.at.Unix() - int64(c.window/time.Second)
	compareTo := c.anchor.at.Unix() + int64(c.window/time.Second)
	walkFrom, walkTo := compareFrom-margin, compareTo+margin
	walkFrom -= ((walkFrom % step) + step) % step

	// Every instant of the walk and its wall time (seconds of a UTC clock showing local time),
	// in instant order and sorted by wall time.
	type reading struct{ instant, wall int64 }
	readings := make([]reading, 0, (walkTo-walkFrom)/step+1)
	for t := walkFrom; t <= walkTo; t += step {
		_, offset := time.Unix(t, 0).In(c.location).Zone()
		readings = append(readings, reading{t, t + int64(offset)})
	}
	byWall := slices.Clone(readings)
	slices.SortFunc(byWall, func(a, b reading) int {
		if a.wall != b.wall {
			return cmp.Compare(a.wall, b.wall)
		}
		return cmp.Compare(a.instant, b.instant)
	})

	interval := c.expr.interval()
	inWindow := func(t int64) bool { return t >= compareFrom && t <= compareTo }
	var exercise oracleExercise
	var fired []int64
	var instants []int64
	var day wallTime
	dayNumber := int64(-1 << 62)
	afterGap := 0 // first reading (in instant order) whose wall time exceeds the current one
	next := 0     // first reading (in wall order) not yet consumed
	for wall := byWall[0].wall; wall <= byWall[len(byWall)-1].wall; wall += step {
		for afterGap < len(readings) && readings[afterGap].wall <= wall {
			afterGap++
		}
		instants = instants[:0]
		for ; next < len(byWall) && byWall[next].wall <= wall; next++ {
			if byWall[next].wall == wall {
				instants = append(instants, byWall[next].instant)
			}
		}
		if wall/86400 != dayNumber { // calendar facts of the day, from the time package
			dayNumber = wall / 86400
			day = wallTimeOf(time.Unix(dayNumber*86400, 0).UTC())
		}
		w := day
		w.hour, w.minute, w.second = int(wall%86400/3600), int(wall%3600/60), int(wall%60)
		if !c.expr.matches(w) {
			continue
		}
		switch {
		case len(instants) == 0: // the wall time was skipped
			if afterGap < len(readings) {
				exercise.gap = exercise.gap || inWindow(readings[afterGap].instant)
				if c.options.Gap == GapShift {
					fired = append(fired, readings[afterGap].instant)
				}
			}
		case len(instants) == 1:
			fired = append(fired, instants[0])
		default: // the wall time repeats
			exercise.repeat = exercise.repeat || inWindow(instants[0]) || inWindow(instants[len(instants)-1])
			switch {
			case c.options.Repeat == RepeatBoth || (c.options.Repeat == RepeatAuto && interval):
				fired = append(fired, instants...)
			case c.options.Repeat == RepeatLast:
				fired = append(fired, instants[len(instants)-1])
			default:
				fired = append(fired, instants[0])
			}
		}
	}
	slices.Sort(fired)
	fired = slices.Compact(fired)
	return slices.DeleteFunc(fired, func(t int64) bool { return !inWindow(t) }), exercise
}

// productionOccurrences enumerates the same window with Next.
func productionOccurrences(t *testing.T, c oracleCase) ([]int64, error) {
	schedule, err := parseIn(c.expr.String(), c.location.String(), c.options)
	if err != nil {
		return nil, err
	}
	compareFrom := c.anchor.at.Add(-c.window)
	compareTo := c.anchor.at.Add(c.window)
	var got []int64
	for at := compareFrom.Add(-time.Nanosecond); ; {
		next, ok := schedule.Next(at)
		if !ok || next.After(compareTo) {
			return got, nil
		}
		if !next.After(at) {
			t.Fatalf("Next(%s) = %s is not after it", at, next)
		}
		got = append(got, next.Unix())
		at = next
	}
}

func TestOracleAgainstBruteForce(t *testing.T) {
	t.Parallel()
	budget := oracleBudgetFromEnv()
	var cases, transitions, occurrences, gapCases, repeatCases atomic.Int64
	t.Run("zones", func(t *testing.T) {
		for zoneIndex, zone := range oracleZones {
			t.Run(zone, func(t *testing.T) {
				t.Parallel()
				location, err := time.LoadLocation(zone)
				if err != nil {
					t.Fatal(err)
				}
				gen := &generator{rand: rand.New(rand.NewPCG(oracleSeed, uint64(zoneIndex)))}
				anchors := anchorsFor(location)
				transitions.Add(int64(len(anchors)))
				if anchors[0].offset != anchors[0].offsetBefore {
					t.Logf("%s: %d offset changes from 2000 to 2040", zone, len(anchors))
				} else {
					t.Logf("%s: no offset change from 2000 to 2040; %d plain anchors", zone, len(anchors))
				}
				for anchorIndex, a := range anchors {
					for i := 0; i < budget.minuteExpressions+budget.secondExpressions; i++ {
						withSeconds := i >= budget.minuteExpressions
						window := budget.minuteWindow
						if withSeconds {
							window = budget.secondWindow
						}
						wall := hintWallTime(gen, location, a)
						c := oracleCase{
							expr:     gen.expression(wallTimeOf(wall), withSeconds, fmt.Sprintf("schedule-%d-%d", anchorIndex, i)),
							options:  gen.options(fmt.Sprintf("schedule-%d-%d", anchorIndex, i)),
							location: location,
							anchor:   a,
							window:   window,
						}
						want, exercise := oracleOccurrences(c)
						if exercise.gap {
							gapCases.Add(1)
						}
						if exercise.repeat {
							repeatCases.Add(1)
						}
						got, err := productionOccurrences(t, c)
						if err != nil {
							t.Fatalf("generated %q does not parse: %v", c.expr.String(), err)
						}
						cases.Add(1)
						occurrences.Add(int64(len(want)))
						if !slices.Equal(got, want) {
							t.Fatalf("%s %q gap=%d repeat=%d around %s (offset %d -> %d), seed %d:\n%s",
								zone, c.expr.String(), c.options.Gap, c.options.Repeat, a.at.Format(time.RFC3339),
								a.offsetBefore, a.offset, oracleSeed, diffOccurrences(location, got, want))
						}
					}
				}
			})
		}
	})
	t.Logf("oracle: %d (expression, transition) cases over %d transitions/anchors in %d zones, %d occurrences compared; "+
		"%d cases had matching wall times in a gap, %d in a repeat",
		cases.Load(), transitions.Load(), len(oracleZones), occurrences.Load(), gapCases.Load(), repeatCases.Load())
}

// hintWallTime picks the wall time the generator aims at: mostly one that the change skips or
// repeats, otherwise the wall time just before or at the change.
func hintWallTime(gen *generator, location *time.Location, a anchor) time.Time {
	wallOf := func(t time.Time) time.Time {
		local := t.In(location)
		return time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), 0, time.UTC)
	}
	jump := time.Duration(a.offset-a.offsetBefore) * time.Second
	switch {
	case jump > 0 && gen.chance(0.8): // inside the gap
		return wallOf(a.at.Add(-time.Second)).Add(time.Second + time.Duration(gen.rand.Int64N(int64(jump/time.Second)))*time.Second)
	case jump < 0 && gen.chance(0.8): // inside the repeat
		return wallOf(a.at).Add(time.Duration(gen.rand.Int64N(int64(-jump/time.Second))) * time.Second)
	case gen.chance(0.5):
		return wallOf(a.at.Add(-time.Second))
	default:
		return wallOf(a.at)
	}
}

func (g *generator) options(hashKey string) Options {
	opts := Options{HashKey: hashKey}
	if g.chance(0.2) {
		opts.Gap = GapSkip
	}
	if g.chance(0.4) {
		opts.Repeat = RepeatPolicy(g.between(1, 3))
	}
	return opts
}

func diffOccurrences(location *time.Location, got, want []int64) string {
	format := func(list []int64) string {
		s := ""
		for i, t := range list {
			if i == 12 {
				return s + fmt.Sprintf(" ...(%d)", len(list))
			}
			s += " " + time.Unix(t, 0).In(location).Format("2006-01-02T15:04:05-07:00")
		}
		return s
	}
	return "next: " + format(got) + "\nwant: " + format(want)
}
