package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// metrics are one run's figures of one side, by row key ("A.p50", "B.rate", ...).
type metrics map[string]float64

// row is one line of the table: a figure of one workload.
type row struct {
	key, label string
	decimals   int
}

// rows are the table's lines, in order; a workload not run has none.
var rows = []row{
	{"A.p50", "A timer lateness p50 (ms)", 1},
	{"A.p99", "A timer lateness p99 (ms)", 1},
	{"A.max", "A timer lateness max (ms)", 1},
	{"A.early", "A early timers (count)", 0},
	{"A.missing", "A missing timers (count)", 0},
	{"A.dup", "A duplicate timers (count)", 0},
	{"B.rate", "B completions/s", 0},
	{"B.mem", "B server peak memory, PSS (MiB)", 0},
	{"C.p50", "C occurrence lateness p50 (ms)", 1},
	{"C.p99", "C occurrence lateness p99 (ms)", 1},
	{"C.max", "C occurrence lateness max (ms)", 1},
	{"C.missing", "C missing occurrences (count)", 0},
	{"C.dup", "C duplicate occurrences (count)", 0},
}

// results gathers every run's metrics per side.
type results map[string][]metrics

// median returns the median of xs (the mean of the middle two for an even count), its min
// and its max.
func median(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// values returns the figure key of every run of side, in run order.
func (r results) values(side, key string) []float64 {
	var out []float64
	for _, m := range r[side] {
		if v, ok := m[key]; ok {
			out = append(out, v)
		}
	}
	return out
}

// writeTable writes the markdown table of the figures both sides have.
func writeTable(w io.Writer, r results, left, right string) {
	fmt.Fprintf(w, "| figure | %s median (min..max) | %s median (min..max) | %s/%s |\n", left, right, left, right)
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, row := range rows {
		lv, rv := r.values(left, row.key), r.values(right, row.key)
		if len(lv) == 0 && len(rv) == 0 {
			continue
		}
		cell := func(vs []float64) string {
			if len(vs) == 0 {
				return "-"
			}
			med, lo, hi := median(vs)
			return fmt.Sprintf("%s (%s..%s)", num(med, row.decimals), num(lo, row.decimals), num(hi, row.decimals))
		}
		ratio := "-"
		if len(lv) > 0 && len(rv) > 0 {
			lm, _, _ := median(lv)
			rm, _, _ := median(rv)
			if rm != 0 {
				ratio = fmt.Sprintf("%.2f", lm/rm)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.label, cell(lv), cell(rv), ratio)
	}
}

// num formats x with decimals digits after the point and thousands separated by commas.
func num(x float64, decimals int) string {
	s := fmt.Sprintf("%.*f", decimals, x)
	intPart, frac, _ := strings.Cut(s, ".")
	sign := ""
	if strings.HasPrefix(intPart, "-") {
		sign, intPart = "-", intPart[1:]
	}
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		return sign + b.String() + "." + frac
	}
	return sign + b.String()
}
