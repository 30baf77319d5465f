package cron

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// This file is the oracle's half of the cron language: a random expression generator that
// keeps the structure it rendered, and a matcher that interprets that structure directly from
// the definitions (predicates per item, calendar facts from the time package). It shares no
// code with the production parser or evaluator.

type oracleItemKind int

const (
	itemStar        oracleItemKind = iota // *
	itemStarStep                          // */n
	itemValue                             // a
	itemValueStep                         // a/n
	itemRange                             // a-b or a-b/n
	itemHash                              // H or H(a-b)
	itemHashStep                          // H/n or H(a-b)/n
	itemLast                              // day-of-month L-n (n may be 0)
	itemLastWeekday                       // day-of-month L-nW
	itemNearest                           // day-of-month aW
	itemLastOf                            // day-of-week aL
	itemNth                               // day-of-week a#n
)

type oracleItem struct {
	kind     oracleItemKind
	a, b     int // values; for hash items with explicit bounds, hasBounds is set
	step     int
	bounded  bool // H(a-b)
	useNames bool // render month/day-of-week values as names
}

// oracleField is one field: a list of items ('*' and specials are alone).
type oracleField []oracleItem

type oracleExpr struct {
	withSeconds bool
	fields      [6]oracleField // second, minute, hour, day-of-month, month, day-of-week
	hashKey     string
}

// oracleBounds are the definitions' value ranges per field.
var oracleBounds = [6]struct{ lo, hi, hashLo, hashHi int }{
	{0, 59, 0, 59}, {0, 59, 0, 59}, {0, 23, 0, 23}, {1, 31, 1, 28}, {1, 12, 1, 12}, {0, 7, 0, 6},
}

var (
	oracleMonthNames = []string{"", "jan", "Feb", "MAR", "apr", "May", "JUN", "jul", "Aug", "SEP", "oct", "Nov", "DEC"}
	oracleDayNames   = []string{"sun", "Mon", "TUE", "wed", "Thu", "FRI", "sat"}
)

func (e *oracleExpr) String() string {
	var parts []string
	for field := 0; field < 6; field++ {
		if field == 0 && !e.withSeconds {
			continue
		}
		var items []string
		for _, it := range e.fields[field] {
			items = append(items, renderItem(field, it))
		}
		parts = append(parts, strings.Join(items, ","))
	}
	return strings.Join(parts, " ")
}

func renderValue(field, v int, names bool) string {
	switch {
	case names && field == 4:
		return oracleMonthNames[v]
	case names && field == 5 && v < 7: // the name SUN is 0: "FRI-SUN" is 5-0, not 5-7
		return oracleDayNames[v]
	}
	return strconv.Itoa(v)
}

func renderItem(field int, it oracleItem) string {
	v := func(x int) string { return renderValue(field, x, it.useNames) }
	switch it.kind {
	case itemStar:
		return "*"
	case itemStarStep:
		return "*/" + strconv.Itoa(it.step)
	case itemValue:
		return v(it.a)
	case itemValueStep:
		return v(it.a) + "/" + strconv.Itoa(it.step)
	case itemRange:
		if it.step > 1 {
			return v(it.a) + "-" + v(it.b) + "/" + strconv.Itoa(it.step)
		}
		return v(it.a) + "-" + v(it.b)
	case itemHash, itemHashStep:
		s := "H"
		if it.bounded {
			s += fmt.Sprintf("(%d-%d)", it.a, it.b)
		}
		if it.kind == itemHashStep {
			s += "/" + strconv.Itoa(it.step)
		}
		return s
	case itemLast:
		if it.a == 0 && it.step == 0 {
			return "L"
		}
		return "L-" + strconv.Itoa(it.a)
	case itemLastWeekday:
		if it.a == 0 {
			return "LW"
		}
		return "L-" + strconv.Itoa(it.a) + "W"
	case itemNearest:
		return strconv.Itoa(it.a) + "W"
	case itemLastOf:
		return v(it.a) + "L"
	case itemNth:
		return v(it.a) + "#" + strconv.Itoa(it.step)
	}
	panic("unknown item")
}

// interval is the Cronos definition: the second, minute or hour field has '*', a range or a
// step.
func (e *oracleExpr) interval() bool {
	for field := 0; field <= 2; field++ {
		if field == 0 && !e.withSeconds {
			continue
		}
		for _, it := range e.fields[field] {
			switch it.kind {
			case itemStar, itemStarStep, itemValueStep, itemRange, itemHashStep:
				return true
			}
		}
	}
	return false
}

// wallTime is a wall-clock time with the calendar facts the definitions need.
type wallTime struct {
	year, month, day, hour, minute, second int
	weekday, monthLength                   int
}

func wallTimeOf(civil time.Time) wallTime {
	return wallTime{
		year: civil.Year(), month: int(civil.Month()), day: civil.Day(),
		hour: civil.Hour(), minute: civil.Minute(), second: civil.Second(),
		weekday:     int(civil.Weekday()),
		monthLength: time.Date(civil.Year(), civil.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day(),
	}
}

func (e *oracleExpr) matches(w wallTime) bool {
	second := w.second
	if !e.withSeconds {
		if second != 0 {
			return false
		}
	} else if !e.fieldMatches(0, second, w) {
		return false
	}
	return e.fieldMatches(1, w.minute, w) && e.fieldMatches(2, w.hour, w) &&
		e.fieldMatches(3, w.day, w) && e.fieldMatches(4, w.month, w) && e.fieldMatches(5, w.weekday, w)
}

func (e *oracleExpr) fieldMatches(field, v int, w wallTime) bool {
	for _, it := range e.fields[field] {
		if e.itemMatches(field, it, v, w) {
			return true
		}
	}
	return false
}

func (e *oracleExpr) hashOf(field int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(e.hashKey))
	h.Write([]byte(strconv.Itoa(field)))
	return h.Sum64()
}

// nearestWeekdayOracle applies the W rule to target day t of w's month.
func nearestWeekdayOracle(w wallTime, t int) int {
	switch time.Date(w.year, time.Month(w.month), t, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		if t == 1 {
			return 3
		}
		return t - 1
	case time.Sunday:
		if t == w.monthLength {
			return t - 2
		}
		return t + 1
	}
	return t
}

func (e *oracleExpr) itemMatches(field int, it oracleItem, v int, w wallTime) bool {
	b := oracleBounds[field]
	if field == 5 { // Sunday is 0 and 7: try both spellings
		if v == 0 && e.valueMatches(field, it, 7, b.lo, b.hi, w) {
			return true
		}
	}
	switch it.kind {
	case itemLast:
		return v == w.monthLength-it.a
	case itemLastWeekday:
		t := w.monthLength - it.a
		return t >= 1 && v == nearestWeekdayOracle(w, t)
	case itemNearest:
		return it.a <= w.monthLength && v == nearestWeekdayOracle(w, it.a)
	case itemLastOf:
		return v == it.a%7 && w.day+7 > w.monthLength
	case itemNth:
		return v == it.a%7 && (w.day-1)/7+1 == it.step
	}
	return e.valueMatches(field, it, v, b.lo, b.hi, w)
}

func (e *oracleExpr) valueMatches(field int, it oracleItem, v, lo, hi int, w wallTime) bool {
	switch it.kind {
	case itemStar:
		return true
	case itemStarStep:
		return (v-lo)%it.step == 0
	case itemValue:
		return v == it.a
	case itemValueStep:
		return v >= it.a && (v-it.a)%it.step == 0
	case itemRange:
		a, bnd, step := it.a, it.b, max(it.step, 1)
		if field == 5 && a == 7 && bnd < 7 {
			a = 0
		}
		if a <= bnd {
			return v >= a && v <= bnd && (v-a)%step == 0
		}
		cycleHi := hi
		if field == 5 {
			cycleHi = 6
			if v == 7 {
				return false
			}
		}
		cycle := cycleHi - lo + 1
		k := ((v-a)%cycle + cycle) % cycle
		distance := ((bnd-a)%cycle + cycle) % cycle
		return k <= distance && k%step == 0
	case itemHash, itemHashStep:
		hl, hh := oracleBounds[field].hashLo, oracleBounds[field].hashHi
		if it.bounded {
			hl, hh = it.a, it.b
		}
		h := e.hashOf(field)
		if it.kind == itemHash {
			return v == hl+int(h%uint64(hh-hl+1))
		}
		first := hl + int(h%uint64(it.step))
		return v >= first && v <= hh && (v-first)%it.step == 0
	}
	return false
}

// generator draws expressions biased toward the wall times around a transition (hint), so
// that most cases fire inside the window.
type generator struct {
	rand *rand.Rand
}

func (g *generator) chance(p float64) bool  { return g.rand.Float64() < p }
func (g *generator) between(lo, hi int) int { return lo + g.rand.IntN(hi-lo+1) }

func (g *generator) expression(hint wallTime, withSeconds bool, hashKey string) *oracleExpr {
	e := &oracleExpr{withSeconds: withSeconds, hashKey: hashKey}
	e.fields[0] = g.timeField(0, hint.second)
	e.fields[1] = g.timeField(1, hint.minute)
	e.fields[2] = g.timeField(2, hint.hour)
	e.fields[3] = g.dayField(hint)
	e.fields[4] = g.monthField(hint)
	e.fields[5] = g.weekdayField(hint)
	return e
}

// near returns a value of the field close to v (wrapping); hours are often v itself.
func (g *generator) near(field, v, spread int) int {
	if field == 2 && g.chance(0.5) {
		return v
	}
	b := oracleBounds[field]
	span := b.hi - b.lo + 1
	return b.lo + ((v-b.lo+g.between(-spread, spread))%span+span)%span
}

func (g *generator) timeField(field, hintValue int) oracleField {
	b := oracleBounds[field]
	spread := 1 // hours: stay on the skipped or repeated hour or its neighbours
	if field < 2 {
		spread = 40
	}
	switch g.rand.IntN(11) {
	case 0, 1:
		return oracleField{{kind: itemStar}}
	case 2:
		return oracleField{{kind: itemStarStep, step: g.between(1, min(b.hi, 30))}}
	case 3:
		return oracleField{{kind: itemValue, a: g.near(field, hintValue, spread)}}
	case 4: // list of values
		var items oracleField
		for n := g.between(2, 4); n > 0; n-- {
			items = append(items, oracleItem{kind: itemValue, a: g.near(field, hintValue, spread)})
		}
		return items
	case 5:
		a, c := g.near(field, hintValue, spread), g.near(field, hintValue, spread)
		return oracleField{{kind: itemRange, a: a, b: c, step: g.between(1, 3)}}
	case 6:
		return oracleField{{kind: itemValueStep, a: g.between(b.lo, b.lo+10), step: g.between(1, b.hi)}}
	case 7:
		return oracleField{{kind: itemHash}}
	case 8:
		return oracleField{{kind: itemHashStep, step: g.between(1, b.hashHi-b.hashLo+1)}}
	case 9:
		a := g.between(b.lo, b.hi)
		c := g.between(a, b.hi)
		kind := itemHash
		step := 0
		if g.chance(0.5) {
			kind, step = itemHashStep, g.between(1, c-a+1)
		}
		return oracleField{{kind: kind, a: a, b: c, bounded: true, step: step}}
	default: // a mixed list
		return oracleField{
			{kind: itemValue, a: g.near(field, hintValue, spread)},
			{kind: itemRange, a: g.near(field, hintValue, spread), b: g.near(field, hintValue, spread), step: 1},
		}
	}
}

func (g *generator) dayField(hint wallTime) oracleField {
	switch g.rand.IntN(14) {
	case 0:
		return oracleField{{kind: itemValue, a: hint.day}}
	case 1:
		return oracleField{{kind: itemRange, a: g.near(3, hint.day, 3), b: g.near(3, hint.day, 3), step: 1}}
	case 2:
		return oracleField{{kind: itemLast, a: g.between(0, 3)}}
	case 3:
		return oracleField{{kind: itemLastWeekday, a: g.between(0, 3)}}
	case 4:
		return oracleField{{kind: itemNearest, a: g.near(3, hint.day, 2)}}
	case 5:
		return oracleField{{kind: itemStarStep, step: g.between(1, 5)}}
	case 6:
		return oracleField{{kind: itemHash}}
	default:
		return oracleField{{kind: itemStar}}
	}
}

func (g *generator) monthField(hint wallTime) oracleField {
	names := g.chance(0.3)
	switch g.rand.IntN(8) {
	case 0:
		return oracleField{{kind: itemValue, a: hint.month, useNames: names}}
	case 1:
		return oracleField{{kind: itemRange, a: g.near(4, hint.month, 2), b: g.near(4, hint.month, 2), step: 1, useNames: names}}
	case 2:
		return oracleField{{kind: itemStarStep, step: g.between(1, 4)}}
	default:
		return oracleField{{kind: itemStar}}
	}
}

func (g *generator) weekdayField(hint wallTime) oracleField {
	names := g.chance(0.3)
	switch g.rand.IntN(14) {
	case 0:
		return oracleField{{kind: itemValue, a: hint.weekday, useNames: names}}
	case 1:
		if hint.weekday == 0 && g.chance(0.5) {
			return oracleField{{kind: itemValue, a: 7}}
		}
		return oracleField{{kind: itemRange, a: g.between(0, 7), b: g.between(0, 7), step: g.between(1, 2), useNames: names}}
	case 2:
		return oracleField{{kind: itemLastOf, a: hint.weekday, useNames: names}}
	case 3:
		return oracleField{{kind: itemNth, a: hint.weekday, step: (hint.day-1)/7 + 1, useNames: names}}
	case 4:
		return oracleField{{kind: itemStarStep, step: g.between(1, 3)}}
	case 5:
		return oracleField{{kind: itemHashStep, step: g.between(1, 3)}}
	default:
		return oracleField{{kind: itemStar}}
	}
}
