package cron

import (
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"

	"github.com/orreryhq/orrery"
)

// maxExpressionBytes bounds the input so a hostile expression cannot cost much to parse.
const maxExpressionBytes = 1024

// fieldIndex numbers the fields by meaning, whatever the expression's length.
type fieldIndex int

const (
	secondField fieldIndex = iota
	minuteField
	hourField
	dayField
	monthField
	weekdayField
)

// fieldInfo describes one field: its value range, names, and the default range of H.
type fieldInfo struct {
	name           string
	lo, hi         int
	names          []string // indexed by value; "" where a value has no name
	hashLo, hashHi int
	canInterval    bool // Cronos: only second, minute and hour make an expression interval-based
}

var fieldInfos = [6]fieldInfo{
	secondField:  {name: "second", lo: 0, hi: 59, hashLo: 0, hashHi: 59, canInterval: true},
	minuteField:  {name: "minute", lo: 0, hi: 59, hashLo: 0, hashHi: 59, canInterval: true},
	hourField:    {name: "hour", lo: 0, hi: 23, hashLo: 0, hashHi: 23, canInterval: true},
	dayField:     {name: "day-of-month", lo: 1, hi: 31, hashLo: 1, hashHi: 28},
	monthField:   {name: "month", lo: 1, hi: 12, hashLo: 1, hashHi: 12, names: monthNames},
	weekdayField: {name: "day-of-week", lo: 0, hi: 7, hashLo: 0, hashHi: 6, names: weekdayNames},
}

var (
	monthNames   = []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	weekdayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

var macros = map[string]string{
	"yearly":       "0 0 0 1 1 *",
	"annually":     "0 0 0 1 1 *",
	"monthly":      "0 0 0 1 * *",
	"weekly":       "0 0 0 * * 0",
	"daily":        "0 0 0 * * *",
	"midnight":     "0 0 0 * * *",
	"hourly":       "0 0 * * * *",
	"every_minute": "0 * * * * *",
	"every_second": "* * * * * *",
}

// fieldToken is one whitespace-separated field of the expression and its byte offset.
type fieldToken struct {
	text   string
	offset int
}

// parseExpression parses a cron expression (or macro) into a spec. Errors are Validation
// errors on field "expression" naming the field number and the character position.
func parseExpression(expression, hashKey string) (spec, error) {
	if len(expression) > maxExpressionBytes {
		return spec{}, orrery.Invalid("expression", "position %d: expression is longer than %d bytes",
			maxExpressionBytes+1, maxExpressionBytes)
	}
	if !utf8.ValidString(expression) {
		return spec{}, orrery.Invalid("expression", "expression is not valid UTF-8")
	}
	tokens := splitFields(expression)
	if len(tokens) > 0 && strings.HasPrefix(tokens[0].text, "@") {
		return parseMacro(expression, tokens)
	}
	switch {
	case len(tokens) == 0:
		return spec{}, orrery.Invalid("expression", "field 1 (minute), position %d: empty expression; expected 5 or 6 fields",
			charPosition(expression, len(expression)))
	case len(tokens) < 5:
		missing := fieldIndex(len(tokens) + 1) // five-field numbering
		return spec{}, orrery.Invalid("expression", "field %d (%s), position %d: missing; expected 5 or 6 fields, got %d",
			len(tokens)+1, fieldInfos[missing].name, charPosition(expression, len(expression)), len(tokens))
	case len(tokens) > 6:
		return spec{}, orrery.Invalid("expression", "field 7, position %d: too many fields; expected 5 or 6, got %d",
			charPosition(expression, tokens[6].offset), len(tokens))
	}

	first := minuteField
	if len(tokens) == 6 {
		first = secondField
	}
	var sets [6]uint64
	sets[secondField] = 1 // five fields: second 0
	var sp spec
	for i, tok := range tokens {
		p := fieldParser{
			expression:  expression,
			tok:         tok,
			fieldNumber: i + 1,
			field:       first + fieldIndex(i),
			hashKey:     hashKey,
			sp:          &sp,
		}
		set, interval, err := p.parse()
		if err != nil {
			return spec{}, err
		}
		sets[p.field] = set
		sp.interval = sp.interval || interval
	}
	sp.seconds = sets[secondField]
	sp.minutes = sets[minuteField]
	sp.hours = sets[hourField]
	sp.days = sets[dayField]
	sp.months = sets[monthField]
	weekdays := sets[weekdayField]
	if weekdays>>7&1 != 0 { // 7 is Sunday too
		weekdays |= 1
	}
	sp.weekdays = weekdays & allWeekdays
	return sp, nil
}

func parseMacro(expression string, tokens []fieldToken) (spec, error) {
	if len(tokens) > 1 {
		return spec{}, orrery.Invalid("expression", "position %d: unexpected text after macro %q",
			charPosition(expression, tokens[1].offset), tokens[0].text)
	}
	name := strings.ReplaceAll(strings.ToLower(tokens[0].text[1:]), "-", "_")
	expansion, ok := macros[name]
	if !ok {
		return spec{}, orrery.Invalid("expression", "position %d: unknown macro %q",
			charPosition(expression, tokens[0].offset), tokens[0].text)
	}
	return parseExpression(expansion, "")
}

func splitFields(expression string) []fieldToken {
	var tokens []fieldToken
	start := -1
	for i := 0; i <= len(expression); i++ {
		separator := i == len(expression) || expression[i] == ' ' || expression[i] == '\t'
		switch {
		case separator && start >= 0:
			tokens = append(tokens, fieldToken{text: expression[start:i], offset: start})
			start = -1
		case !separator && start < 0:
			start = i
		}
	}
	return tokens
}

// charPosition converts a byte offset to a 1-based character position.
func charPosition(expression string, byteOffset int) int {
	return utf8.RuneCountInString(expression[:byteOffset]) + 1
}

// fieldParser parses one field; pos is the byte index in tok.text.
type fieldParser struct {
	expression  string
	tok         fieldToken
	pos         int
	fieldNumber int // 1-based, as written
	field       fieldIndex
	hashKey     string
	sp          *spec
}

func (p *fieldParser) info() *fieldInfo { return &fieldInfos[p.field] }

func (p *fieldParser) fail(at int, format string, args ...any) error {
	return orrery.Invalid("expression", "field %d (%s), position %d: %s", p.fieldNumber, p.info().name,
		charPosition(p.expression, p.tok.offset+at), fmt.Sprintf(format, args...))
}

func (p *fieldParser) done() bool { return p.pos >= len(p.tok.text) }

func (p *fieldParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.tok.text[p.pos]
}

func (p *fieldParser) accept(c byte) bool {
	if !p.done() && upper(p.tok.text[p.pos]) == c {
		p.pos++
		return true
	}
	return false
}

func (p *fieldParser) unexpected() error {
	if p.done() {
		return p.fail(p.pos, "unexpected end of field")
	}
	r, _ := utf8.DecodeRuneInString(p.tok.text[p.pos:])
	return p.fail(p.pos, "unexpected character %q", r)
}

func (p *fieldParser) end() error {
	if !p.done() {
		return p.unexpected()
	}
	return nil
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// parse returns the field's value set and whether it makes the expression interval-based.
// Day fields with L, W or # record their rule in p.sp instead.
func (p *fieldParser) parse() (uint64, bool, error) {
	info := p.info()
	switch c := upper(p.peek()); {
	case c == '*' || c == '?':
		p.pos++
		step := 1
		if p.accept('/') {
			var err error
			if step, err = p.number(1, info.hi, "step"); err != nil {
				return 0, false, err
			}
		}
		return rangeSet(info, info.lo, info.hi, step), info.canInterval, p.end()
	case c == 'H':
		return p.parseHash()
	case c == 'L' && p.field == dayField:
		return p.parseLastDay()
	}

	var set uint64
	var interval bool
	for item := 0; ; item++ {
		low, err := p.value()
		if err != nil {
			return 0, false, err
		}
		switch {
		case item == 0 && p.field == dayField && p.accept('W'):
			p.sp.dayRule, p.sp.dayTarget = dayNearest, low
			return 0, false, p.end()
		case item == 0 && p.field == weekdayField && p.accept('L'):
			p.sp.weekdayRule = weekdayLast
			return 1 << low, false, p.end()
		case item == 0 && p.field == weekdayField && p.accept('#'):
			nth, err := p.number(1, 5, "week number")
			if err != nil {
				return 0, false, err
			}
			p.sp.weekdayRule, p.sp.nthWeekday = weekdayNth, nth
			return 1 << low, false, p.end()
		case p.accept('-'):
			high, err := p.value()
			if err != nil {
				return 0, false, err
			}
			step := 1
			if p.accept('/') {
				if step, err = p.number(1, info.hi, "step"); err != nil {
					return 0, false, err
				}
			}
			set |= rangeSet(info, low, high, step)
			interval = true
		case p.accept('/'):
			step, err := p.number(1, info.hi, "step")
			if err != nil {
				return 0, false, err
			}
			set |= rangeSet(info, low, info.hi, step)
			interval = true
		default:
			set |= 1 << low
		}
		if p.accept(',') {
			continue
		}
		if p.field == dayField && upper(p.peek()) == 'W' {
			return 0, false, p.fail(p.pos, "W needs a single day value, like 15W")
		}
		return set, interval && info.canInterval, p.end()
	}
}

// rangeSet returns low..high every step; a reversed range wraps around the field's cycle
// (for day-of-week the cycle is 0-6, and a range starting at 7 starts at Sunday 0).
func rangeSet(info *fieldInfo, low, high, step int) uint64 {
	var set uint64
	cycleHigh := info.hi
	if info == &fieldInfos[weekdayField] {
		cycleHigh = 6
		if low == 7 && high < 7 {
			low = 0
		}
	}
	if low <= high {
		for v := low; v <= high; v += step {
			set |= 1 << v
		}
		return set
	}
	cycle := cycleHigh - info.lo + 1
	distance := (high - low + cycle) % cycle
	for k := 0; k <= distance; k += step {
		set |= 1 << (info.lo + (low-info.lo+k)%cycle)
	}
	return set
}

// value reads a number (at most two digits) or a three-letter name, within the field's range.
func (p *fieldParser) value() (int, error) {
	info := p.info()
	start := p.pos
	c := p.peek()
	switch {
	case isDigit(c):
		v, err := p.digits()
		if err != nil {
			return 0, err
		}
		if v < info.lo || v > info.hi {
			return 0, p.fail(start, "value %d out of range %d-%d", v, info.lo, info.hi)
		}
		return v, nil
	case isLetter(c) && info.names != nil:
		if len(p.tok.text)-p.pos < 3 {
			return 0, p.fail(start, "unknown name %q", p.tok.text[p.pos:])
		}
		name := strings.ToUpper(p.tok.text[p.pos : p.pos+3])
		for v, known := range info.names {
			if known != "" && known == name {
				p.pos += 3
				return v, nil
			}
		}
		return 0, p.fail(start, "unknown name %q", p.tok.text[p.pos:p.pos+3])
	case p.done():
		return 0, p.fail(start, "missing value")
	default:
		return 0, p.unexpected()
	}
}

// digits reads one or two decimal digits.
func (p *fieldParser) digits() (int, error) {
	start := p.pos
	v := 0
	for !p.done() && isDigit(p.peek()) {
		if p.pos-start == 2 {
			return 0, p.fail(start, "number has more than two digits")
		}
		v = v*10 + int(p.peek()-'0')
		p.pos++
	}
	if p.pos == start {
		if p.done() {
			return 0, p.fail(start, "missing number")
		}
		return 0, p.unexpected()
	}
	return v, nil
}

func (p *fieldParser) number(low, high int, what string) (int, error) {
	start := p.pos
	v, err := p.digits()
	if err != nil {
		return 0, err
	}
	if v < low || v > high {
		return 0, p.fail(start, "%s %d out of range %d-%d", what, v, low, high)
	}
	return v, nil
}

// parseLastDay parses L, L-n, LW and L-nW in the day-of-month field.
func (p *fieldParser) parseLastDay() (uint64, bool, error) {
	p.pos++ // L
	if p.accept('-') {
		offset, err := p.number(0, 30, "offset")
		if err != nil {
			return 0, false, err
		}
		p.sp.lastOffset = offset
	}
	p.sp.dayRule = dayLast
	if p.accept('W') {
		p.sp.dayRule = dayLastNearest
	}
	return 0, false, p.end()
}

// parseHash parses H, H(a-b), H/n and H(a-b)/n.
func (p *fieldParser) parseHash() (uint64, bool, error) {
	info := p.info()
	if p.hashKey == "" {
		return 0, false, p.fail(p.pos, "H needs a hash key (the schedule id)")
	}
	p.pos++ // H
	low, high := info.hashLo, info.hashHi
	if p.accept('(') {
		var err error
		if low, err = p.value(); err != nil {
			return 0, false, err
		}
		if !p.accept('-') {
			return 0, false, p.unexpected()
		}
		highAt := p.pos
		if high, err = p.value(); err != nil {
			return 0, false, err
		}
		if high < low {
			return 0, false, p.fail(highAt, "H range %d-%d is reversed", low, high)
		}
		if !p.accept(')') {
			return 0, false, p.unexpected()
		}
	}
	hash := hashValue(p.hashKey, p.field)
	span := uint64(high - low + 1)
	if p.accept('/') {
		step, err := p.number(1, int(span), "step")
		if err != nil {
			return 0, false, err
		}
		var set uint64
		for v := low + int(hash%uint64(step)); v <= high; v += step {
			set |= 1 << v
		}
		return set, info.canInterval, p.end()
	}
	return 1 << (low + int(hash%span)), false, p.end()
}

// hashValue is fnv64a of the hash key followed by the field's decimal index.
func hashValue(hashKey string, field fieldIndex) uint64 {
	h := fnv.New64a()
	h.Write([]byte(hashKey))
	h.Write([]byte{byte('0' + field)})
	return h.Sum64()
}
