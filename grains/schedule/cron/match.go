package cron

import "math/bits"

// Wall-clock ("civil") times are int64 seconds since 1970-01-01 00:00:00 of the local calendar,
// counted as if the zone were UTC. Matching works on them alone; next.go maps them to instants.

const (
	secondsPerDay = 86400
	maxYear       = 9999
	// calendarCycleYears is the Gregorian cycle: dates and weekdays repeat every 400 years, so
	// an expression with no match in 401 consecutive years never matches.
	calendarCycleYears = 400
)

// dayRule says how the day-of-month field matches.
type dayRule uint8

const (
	daySet         dayRule = iota // the days in spec.days
	dayLast                       // L or L-n: the last day minus lastOffset
	dayNearest                    // nW: the weekday nearest to dayTarget
	dayLastNearest                // LW or L-nW: the weekday nearest to the last day minus lastOffset
)

// weekdayRule says how the day-of-week field matches.
type weekdayRule uint8

const (
	weekdaySet  weekdayRule = iota // the weekdays in spec.weekdays
	weekdayLast                    // nL: the last such weekday of the month
	weekdayNth                     // n#k: the k-th such weekday of the month
)

// spec is a parsed expression: one bit per allowed value of each field.
type spec struct {
	seconds  uint64 // bits 0-59
	minutes  uint64 // bits 0-59
	hours    uint64 // bits 0-23
	days     uint64 // bits 1-31
	months   uint64 // bits 1-12
	weekdays uint64 // bits 0-6, Sunday = 0

	dayRule     dayRule
	dayTarget   int // dayNearest
	lastOffset  int // dayLast, dayLastNearest
	weekdayRule weekdayRule
	nthWeekday  int // weekdayNth, 1-5

	// interval is Cronos' flag: the second, minute or hour field has '*', a range or a step.
	interval bool
}

const (
	allDays     uint64 = 0xFFFFFFFE // bits 1-31
	allWeekdays uint64 = 0x7F
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// daysFromCivil returns the day number (0 = 1970-01-01) of a proleptic Gregorian date.
func daysFromCivil(year int64, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := floorDiv(year, 400)
	yearOfEra := year - era*400
	m := int64(month)
	if m > 2 {
		m -= 3
	} else {
		m += 9
	}
	dayOfYear := (153*m+2)/5 + int64(day) - 1
	dayOfEra := yearOfEra*365 + yearOfEra/4 - yearOfEra/100 + dayOfYear
	return era*146097 + dayOfEra - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(dayNumber int64) (year int64, month, day int) {
	z := dayNumber + 719468
	era := floorDiv(z, 146097)
	dayOfEra := z - era*146097
	yearOfEra := (dayOfEra - dayOfEra/1460 + dayOfEra/36524 - dayOfEra/146096) / 365
	dayOfYear := dayOfEra - (365*yearOfEra + yearOfEra/4 - yearOfEra/100)
	mp := (5*dayOfYear + 2) / 153
	day = int(dayOfYear - (153*mp+2)/5 + 1)
	if mp < 10 {
		month = int(mp + 3)
	} else {
		month = int(mp - 9)
	}
	year = yearOfEra + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

// weekdayOf returns 0 (Sunday) to 6 (Saturday); 1970-01-01 was a Thursday.
func weekdayOf(dayNumber int64) int {
	return int((dayNumber%7 + 7 + 4) % 7)
}

func isLeap(year int64) bool {
	return year%4 == 0 && (year%100 != 0 || year%400 == 0)
}

func daysIn(year int64, month int) int {
	switch month {
	case 2:
		if isLeap(year) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	default:
		return 31
	}
}

// nearestWeekday moves day to the nearest Monday-Friday without leaving the month.
func nearestWeekday(day, weekday, monthLength int) int {
	switch weekday {
	case 6: // Saturday
		if day == 1 {
			return day + 2
		}
		return day - 1
	case 0: // Sunday
		if day == monthLength {
			return day - 2
		}
		return day + 1
	default:
		return day
	}
}

// dayMask returns the days (bits 1-31) of the month that match both day fields.
func (sp *spec) dayMask(year int64, month int) uint64 {
	monthLength := daysIn(year, month)
	inMonth := uint64(1)<<(monthLength+1) - 2
	firstDay := daysFromCivil(year, month, 1)
	firstWeekday := weekdayOf(firstDay)

	var mask uint64
	switch sp.dayRule {
	case daySet:
		mask = sp.days & inMonth
	case dayLast:
		if d := monthLength - sp.lastOffset; d >= 1 {
			mask = 1 << d
		}
	case dayNearest, dayLastNearest:
		target := sp.dayTarget
		if sp.dayRule == dayLastNearest {
			target = monthLength - sp.lastOffset
		}
		if target >= 1 && target <= monthLength {
			mask = 1 << nearestWeekday(target, (firstWeekday+target-1)%7, monthLength)
		}
	}
	if mask == 0 || (sp.weekdays == allWeekdays && sp.weekdayRule == weekdaySet) {
		return mask
	}

	var byWeekday uint64
	for d := 1; d <= monthLength; d++ {
		if sp.weekdays>>((firstWeekday+d-1)%7)&1 != 0 {
			byWeekday |= 1 << d
		}
	}
	switch sp.weekdayRule {
	case weekdayLast:
		byWeekday &= inMonth &^ (uint64(1)<<(monthLength-6) - 1) // days > monthLength-7
	case weekdayNth:
		first := 7*(sp.nthWeekday-1) + 1
		byWeekday &= (uint64(1)<<7 - 1) << first
	}
	return mask & byWeekday
}

// nextBit returns the lowest set bit of set at or above from.
func nextBit(set uint64, from int) (int, bool) {
	if from >= 64 {
		return 0, false
	}
	rest := set >> from
	if rest == 0 {
		return 0, false
	}
	return from + bits.TrailingZeros64(rest), true
}

func firstBit(set uint64) int { return bits.TrailingZeros64(set) }

// nextTimeOfDay returns the first matching time of day at or after hour:minute:second.
func (sp *spec) nextTimeOfDay(hour, minute, second int) (int, int, int, bool) {
	if sp.hours>>hour&1 != 0 {
		if sp.minutes>>minute&1 != 0 {
			if s, ok := nextBit(sp.seconds, second); ok {
				return hour, minute, s, true
			}
		}
		if m, ok := nextBit(sp.minutes, minute+1); ok {
			return hour, m, firstBit(sp.seconds), true
		}
	}
	if h, ok := nextBit(sp.hours, hour+1); ok {
		return h, firstBit(sp.minutes), firstBit(sp.seconds), true
	}
	return 0, 0, 0, false
}

// nextMatch returns the first civil time at or after from that matches, searching field by
// field (year, month, day mask, then time of day); false if none up to year 9999.
func (sp *spec) nextMatch(from int64) (int64, bool) {
	dayNumber := floorDiv(from, secondsPerDay)
	secondOfDay := int(from - dayNumber*secondsPerDay)
	startYear, startMonth, startDay := civilFromDays(dayNumber)
	if startYear > maxYear {
		return 0, false
	}
	lastYear := min(startYear+calendarCycleYears, maxYear)
	for year := startYear; year <= lastYear; year++ {
		month := 1
		if year == startYear {
			month = startMonth
		}
		for ; month <= 12; month++ {
			if sp.months>>month&1 == 0 {
				continue
			}
			mask := sp.dayMask(year, month)
			if year == startYear && month == startMonth {
				if mask>>startDay&1 != 0 {
					h, m, s, ok := sp.nextTimeOfDay(secondOfDay/3600, secondOfDay/60%60, secondOfDay%60)
					if ok {
						return dayNumber*secondsPerDay + int64(h*3600+m*60+s), true
					}
				}
				mask &^= uint64(1)<<(startDay+1) - 1
			}
			if mask == 0 {
				continue
			}
			day := firstBit(mask)
			at := daysFromCivil(year, month, day)*secondsPerDay +
				int64(firstBit(sp.hours)*3600+firstBit(sp.minutes)*60+firstBit(sp.seconds))
			return at, true
		}
	}
	return 0, false
}

// satisfiable reports whether any date matches: it scans one whole 400-year cycle.
func (sp *spec) satisfiable() bool {
	for year := int64(2000); year < 2000+calendarCycleYears; year++ {
		for month := 1; month <= 12; month++ {
			if sp.months>>month&1 != 0 && sp.dayMask(year, month) != 0 {
				return true
			}
		}
	}
	return false
}
