package clockoffset

import (
	"testing"
	"time"
)

func TestMeasureTakesThePeersReadingAtTheMiddleOfTheRoundTrip(t *testing.T) {
	sent := time.Unix(1_000, 0)
	at := time.Unix(5, 0)
	for _, tc := range []struct {
		name      string
		roundTrip time.Duration
		peer      time.Time
		offset    time.Duration
		uncertain time.Duration
	}{
		{"same clock", 20 * time.Millisecond, sent.Add(10 * time.Millisecond), 0, 10 * time.Millisecond},
		{"peer ahead", 20 * time.Millisecond, sent.Add(10*time.Millisecond + 5*time.Minute), 5 * time.Minute, 10 * time.Millisecond},
		{"peer behind", 4 * time.Millisecond, sent.Add(2*time.Millisecond - 286*time.Second), -286 * time.Second, 2 * time.Millisecond},
		{"no round trip", 0, sent.Add(time.Second), time.Second, 0},
		{"negative round trip counts as zero", -time.Second, sent.Add(time.Second), time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Measure(sent, tc.roundTrip, tc.peer, at)
			if e.Offset != tc.offset || e.Uncertainty != tc.uncertain || !e.At.Equal(at) {
				t.Fatalf("Measure = %+v, want offset %v ± %v at %v", e, tc.offset, tc.uncertain, at)
			}
		})
	}
}

func TestBeyondCountsOnlyWhatTheUncertaintyCannotExplain(t *testing.T) {
	const bound = 500 * time.Millisecond
	for _, tc := range []struct {
		offset, uncertainty time.Duration
		beyond              bool
	}{
		{0, 0, false},
		{bound, 0, false},
		{bound + time.Microsecond, 0, true},
		{-bound - time.Microsecond, 0, true},
		{bound + 100*time.Millisecond, 100 * time.Millisecond, false},
		{bound + 100*time.Millisecond, 99 * time.Millisecond, true},
		{-5 * time.Minute, time.Second, true},
	} {
		e := Estimate{Offset: tc.offset, Uncertainty: tc.uncertainty}
		if got := e.Beyond(bound); got != tc.beyond {
			t.Errorf("%v ± %v beyond %v = %v, want %v", tc.offset, tc.uncertainty, bound, got, tc.beyond)
		}
	}
}

func TestJudgeNeedsAStrictMajorityOfTheSilosMeasured(t *testing.T) {
	const bound = 500 * time.Millisecond
	near := Estimate{Offset: 100 * time.Millisecond, Uncertainty: time.Millisecond}
	far := Estimate{Offset: -5 * time.Minute, Uncertainty: time.Millisecond}
	masked := Estimate{Offset: 600 * time.Millisecond, Uncertainty: 200 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		estimates []Estimate
		live      int
		bound     time.Duration
		want      Fitness
		far       int
	}{
		{"no peer: a lone silo is fit", nil, 0, bound, Fit, 0},
		{"peers not measured yet", nil, 2, bound, Unjudged, 0},
		{"disabled", []Estimate{far, far}, 2, 0, Fit, 0},
		{"skewed silo of three: both peers far", []Estimate{far, far}, 2, bound, Unfit, 2},
		{"good silo of three: only the skewed peer far", []Estimate{near, far}, 2, bound, Fit, 1},
		{"one of two peers measured, far: cannot tell yet", []Estimate{far}, 2, bound, Unjudged, 1},
		{"one of two peers measured, near: fit whatever the other", []Estimate{near}, 2, bound, Fit, 0},
		{"two silos, not measured", nil, 1, bound, Unjudged, 0},
		{"two silos, near", []Estimate{near}, 1, bound, Fit, 0},
		{"two silos far apart: a tie judges neither", []Estimate{far}, 1, bound, Unjudged, 1},
		{"four, two of three peers far: a tie", []Estimate{far, far, near}, 3, bound, Unjudged, 2},
		{"skewed silo of five", []Estimate{far, far, far, far}, 4, bound, Unfit, 4},
		{"five, three of four peers far", []Estimate{far, far, far, near}, 4, bound, Unfit, 3},
		{"five, two of four peers far", []Estimate{far, far, near, near}, 4, bound, Fit, 2},
		{"five, three of four measured far", []Estimate{far, far, far}, 4, bound, Unfit, 3},
		{"five, two of three measured far", []Estimate{far, far, near}, 4, bound, Unjudged, 2},
		{"within the uncertainty", []Estimate{masked, masked}, 2, bound, Fit, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.estimates, tc.live, tc.bound)
			if v.Fitness != tc.want || v.Far != tc.far || v.Measured != len(tc.estimates) || v.Bound != tc.bound {
				t.Fatalf("Judge = %+v, want %v with %d far of %d", v, tc.want, tc.far, len(tc.estimates))
			}
		})
	}
	if v := Judge([]Estimate{near, far}, 2, bound); v.Largest != far.Offset {
		t.Errorf("Largest = %v, want %v", v.Largest, far.Offset)
	}
}
