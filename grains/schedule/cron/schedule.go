package cron

import (
	"strconv"
	"time"

	"github.com/orreryhq/orrery"
)

// EvaluatorVersion identifies the semantics of Parse and Next, the newest this binary
// evaluates. A schedule generation pins the version its partition runs; a binary that does not
// know a generation's version must not compute that generation's occurrences. A new version
// keeps every older one's semantics available (the generations that pinned them go on).
var EvaluatorVersion = linkedEvaluatorVersion(evaluatorVersionAtLink)

// evaluatorVersionAtLink, set at link time (go build -ldflags "-X
// github.com/orreryhq/orrery/grains/schedule/cron.evaluatorVersionAtLink=2"), makes a binary
// that claims a newer evaluator version with version 1's semantics: what a mixed-version
// cluster's tests run to stand for the next binary. Unset, the version is 1.
var evaluatorVersionAtLink string

// linkedEvaluatorVersion parses evaluatorVersionAtLink (1 when unset or not a number above 1).
func linkedEvaluatorVersion(s string) uint32 {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v < 1 {
		return 1
	}
	return uint32(v)
}

// GapPolicy says what happens to an occurrence whose local time falls in a spring-forward gap.
type GapPolicy int

const (
	// GapShift fires it once, at the first instant after the gap (Cronos).
	GapShift GapPolicy = iota
	// GapSkip drops it.
	GapSkip
)

// RepeatPolicy says how often an occurrence whose local time repeats (fall-back) fires.
type RepeatPolicy int

const (
	// RepeatAuto is the Cronos rule: interval-based expressions (second, minute or hour field
	// with '*', a range or a step) fire in both passes, others once in the first pass.
	RepeatAuto RepeatPolicy = iota
	// RepeatFirst fires once, in the first pass.
	RepeatFirst
	// RepeatLast fires once, in the last pass.
	RepeatLast
	// RepeatBoth fires in every pass.
	RepeatBoth
)

// Options are the per-schedule inputs besides the expression and the zone.
type Options struct {
	// HashKey seeds H; it is the schedule id, so every silo derives the same values.
	HashKey string
	// Gap is the spring-forward policy.
	Gap GapPolicy
	// Repeat is the fall-back policy.
	Repeat RepeatPolicy
}

// Schedule is a parsed expression bound to its location and options. It is immutable and safe
// for concurrent use.
type Schedule struct {
	spec     spec
	location *time.Location
	options  Options
	never    bool // no date ever matches (e.g. 30 February)
}

// Parse parses a cron expression for zone, a location from LoadZone. Errors are Validation
// *orrery.Error values with Field "expression" (the message names the 1-based field number and
// character position), "gap_policy" or "repeat_policy".
func Parse(expression string, zone *time.Location, opts Options) (*Schedule, error) {
	if opts.Gap != GapShift && opts.Gap != GapSkip {
		return nil, orrery.Invalid("gap_policy", "unknown gap policy %d", int(opts.Gap))
	}
	if opts.Repeat < RepeatAuto || opts.Repeat > RepeatBoth {
		return nil, orrery.Invalid("repeat_policy", "unknown repeat policy %d", int(opts.Repeat))
	}
	if zone == nil {
		zone = time.UTC
	}
	sp, err := parseExpression(expression, opts.HashKey)
	if err != nil {
		return nil, err
	}
	return &Schedule{spec: sp, location: zone, options: opts, never: !sp.satisfiable()}, nil
}

// LoadZone returns the location of the IANA zone named name, built from tzif alone: its
// compiled rules, in the format zic writes, as package zonerules and a partition's state hold
// them. No zone database is read, so every caller given the same bytes gets the same rules.
// "" and "UTC" are UTC and need no rules; "Local" is refused (it would differ between silos).
// Errors are Validation *orrery.Error values with Field "time_zone".
func LoadZone(name string, tzif []byte) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, orrery.Invalid("time_zone", "time zone %q is not allowed; name an IANA zone", name)
	}
	if len(tzif) == 0 {
		return nil, orrery.Invalid("time_zone", "unknown time zone %q", name)
	}
	location, err := time.LoadLocationFromTZData(name, tzif)
	if err != nil {
		return nil, orrery.Invalid("time_zone", "the rules of time zone %q do not decode: %v", name, err)
	}
	return location, nil
}
