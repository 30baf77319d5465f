package cron

import (
	"testing"
	"time"
)

// BenchmarkNext enumerates consecutive occurrences; ns/op is the cost of one Next call.
func BenchmarkNext(b *testing.B) {
	for _, c := range []struct{ name, expression, zone string }{
		{"every-minute-utc", "* * * * *", "UTC"},
		{"every-minute-new-york", "* * * * *", "America/New_York"},
		{"business-hours-new-york", "*/15 9-17 * * MON-FRI", "America/New_York"},
		{"daily-0230-new-york", "30 2 * * *", "America/New_York"},
		{"last-weekday-lord-howe", "0 30 1 LW * *", "Australia/Lord_Howe"},
		{"friday-13th-santiago", "0 0 13 * FRI", "America/Santiago"},
		{"leap-day-monday-utc", "0 0 29 2 MON", "UTC"},
		{"seconds-hashed-london", "H/10 H 1-3 * * SUN", "Europe/London"},
	} {
		b.Run(c.name, func(b *testing.B) {
			schedule := mustParse(b, c.expression, c.zone, Options{HashKey: "bench"})
			start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			at := start
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				next, ok := schedule.Next(at)
				if !ok {
					at = start
					continue
				}
				at = next
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "occurrences/s")
		})
	}
}

// BenchmarkNextNever is an expression that never matches: Parse found that out once.
func BenchmarkNextNever(b *testing.B) {
	schedule := mustParse(b, "0 0 30 2 *", "America/New_York", Options{})
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		schedule.Next(at)
	}
}

// BenchmarkParse parses a busy expression with its zone.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := parseIn("0 */10 12-20 ? DEC,JAN-MAR 1-5", "America/New_York", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
