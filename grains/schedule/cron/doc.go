// Package cron owns cron expressions: parsing them (with their time zone and DST policy) into a
// Schedule and computing, purely and deterministically, the next occurrence after an instant.
//
// # Expression
//
// Five fields (minute hour day-of-month month day-of-week) or six with a leading second field,
// separated by spaces or tabs, case-insensitive, following Cronos (HangfireIO/Cronos):
//
//	second        0-59            * ? , - / H
//	minute        0-59            * ? , - / H
//	hour          0-23            * ? , - / H
//	day-of-month  1-31            * ? , - / H  L  L-n  W  LW  L-nW
//	month         1-12, JAN-DEC   * ? , - / H
//	day-of-week   0-7, SUN-SAT    * ? , - / H  nL  n#k            (0 and 7 are Sunday)
//
// Ranges may be reversed (22-2 means 22,23,0,1,2); a step continues across the wrap. '?' is a
// synonym of '*'. When both day fields are restricted, a day must match both (Cronos' AND rule:
// "0 0 13 * FRI" is Friday the 13th). nW is the weekday nearest to day n without leaving the
// month (a Saturday 1st moves to Monday the 3rd, a Sunday last day to Friday); a day beyond the
// month's length never matches. Numbers have at most two digits. Macros: @yearly, @annually,
// @monthly, @weekly, @daily, @midnight, @hourly, @every_minute, @every_second (a '-' may replace
// the '_'); unlike Cronos they are never jittered.
//
// H picks one value of the field deterministically from Options.HashKey (the schedule id), so
// every silo computes the same instants: fnv64a(HashKey followed by the decimal digit of the
// field: 0 second, 1 minute, 2 hour, 3 day-of-month, 4 month, 5 day-of-week) selects
// lo + hash mod (hi-lo+1). Forms: H (range of the field; day-of-month 1-28, day-of-week 0-6),
// H(a-b), H/n (offset hash mod n, then every n), H(a-b)/n. H must be the whole field.
//
// # Time zone and DST
//
// Matching happens on the wall clock of the schedule's IANA zone (default UTC), a location
// LoadZone builds from the zone's compiled rules alone (TZif bytes), never from $ZONEINFO or a
// host's zone database: the caller says which rules. The schedule state machine passes the
// rules its partition's state holds, which the leader carried in from its binary (package
// zonerules), so every replica computes the same instants.
//
// When the wall clock jumps forward (a gap), an occurrence whose local time does not exist fires
// once, at the first instant after the gap (GapShift, the Cronos rule), or not at all (GapSkip).
// When it jumps back (a repeat), RepeatAuto applies the Cronos rule: an expression whose second,
// minute or hour field contains '*', a range or a step (H/n included) is interval-based and
// fires in both passes; any other fires once, in the first pass. RepeatFirst, RepeatLast and
// RepeatBoth force one behaviour. Every offset change in the zone's history counts, not only
// DST: Pacific/Apia's skipped 30 December 2011 is one 24-hour gap.
//
// The package is pure: no clock, no randomness, no goroutines, no I/O.
package cron
