package silo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/clockoffset"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// offsetClock is the real clock moved by offset, as the silo binary's ORRERY_CLOCK_OFFSET
// makes it.
type offsetClock struct{ offset time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.offset) }
func (c offsetClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return time.AfterFunc(d, f)
}

// TestAClockUnfitSiloLeadsNoPartitionAndTheOthersServe: of three founders, one runs on a
// clock 5 minutes behind. It judges itself clock-unfit within seconds, hands over every
// leadership and takes none back, its /readyz answers 503 naming the clock offset and its
// /metrics say so; the others are fit, lead every partition, and every partition takes
// commands stamped with a logged time near the real time (a leader 5 minutes behind would
// stamp its last logged time + 1 µs, entry after entry).
func TestAClockUnfitSiloLeadsNoPartitionAndTheOthersServe(t *testing.T) {
	const partitions = 8
	skewed := -5 * time.Minute
	first := true
	silos := startFounders(t, 3, partitions, func(cfg *Config) {
		if first {
			cfg.Clock = offsetClock{skewed}
			first = false
		}
	})
	var bad *Silo
	var good []*Silo
	for _, s := range silos {
		if _, ok := s.cfg.Clock.(offsetClock); ok {
			bad = s
		} else {
			good = append(good, s)
		}
	}
	waitAllVoters(t, silos, partitions)
	leaders := func() (onBad int, led int) {
		for n := range partitions {
			for _, s := range silos {
				if st, ok := s.host.Status(n); ok && st.Leader == s.SiloID() {
					led++
					if s == bad {
						onBad++
					}
				}
			}
		}
		return onBad, led
	}
	start := time.Now()
	testkit.Eventually(t, 30*time.Second, "the skewed silo to judge itself unfit, lead no partition, and the others every one", func() bool {
		onBad, led := leaders()
		return bad.ClockVerdict().Fitness == clockoffset.Unfit && onBad == 0 && led == partitions
	})
	t.Logf("the skewed silo led nothing %v after every partition had its three voters", time.Since(start).Round(time.Millisecond))
	if v := bad.ClockVerdict(); v.Fitness != clockoffset.Unfit || v.Far != 2 {
		t.Fatalf("the skewed silo's verdict: %+v, want unfit with both peers beyond", v)
	}
	for _, s := range good {
		if v := s.ClockVerdict(); v.Fitness != clockoffset.Fit {
			t.Fatalf("silo %s's verdict: %+v, want fit", cluster.FormatID(s.SiloID()), v)
		}
	}

	// Every partition takes commands, stamped near the real time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for n := range partitions {
		lane := &orreryv1.Lane{Namespace: "clock", Queue: "jobs", Key: uuid.NewString()}
		for route.Partition(lane, partitions) != n {
			lane.Key = uuid.NewString()
		}
		if _, err := good[0].Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m"}); err != nil {
			t.Fatalf("partition %d: %v", n, err)
		}
		// The leader's status follows its applies by a round (Advance): poll.
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("partition %d's leader to have applied an entry stamped near the real time", n), func() bool {
			for _, s := range good {
				if st, ok := s.host.Status(n); ok && st.Leader == s.SiloID() {
					lag := time.Since(time.UnixMicro(st.AppliedLoggedTimeMicros))
					return lag < 5*time.Second && lag > -5*time.Second
				}
			}
			return false
		})
	}

	// The skewed silo is not ready, and says why; the others are.
	status, body := get(t, "http://"+bad.AdminAddress()+"/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "clock offset") {
		t.Fatalf("the skewed silo's /readyz: %d %s, want 503 naming the clock offset", status, body)
	}
	for _, s := range good {
		if status, body := get(t, "http://"+s.AdminAddress()+"/readyz"); status != http.StatusOK {
			t.Fatalf("a fit silo's /readyz: %d %s", status, body)
		}
	}
	_, metrics := get(t, "http://"+bad.AdminAddress()+"/metrics")
	if !strings.Contains(metrics, fmt.Sprintf("orrery_clock_unfit{silo=%q} 1", cluster.FormatID(bad.SiloID()))) ||
		!strings.Contains(metrics, "orrery_clock_offset_seconds{peer=") {
		t.Fatalf("the skewed silo's /metrics lack orrery_clock_unfit 1 or the per-peer offsets:\n%s", grepLines(metrics, "orrery_clock"))
	}
	_, table := get(t, "http://"+good[0].AdminAddress()+"/v1/silos")
	var silosJSON struct {
		Silos []struct {
			SiloID string `json:"silo_id"`
			Clock  *struct {
				Fitness  string  `json:"fitness"`
				OffsetMS float64 `json:"offset_ms"`
			} `json:"clock"`
		} `json:"silos"`
	}
	if err := json.Unmarshal([]byte(table), &silosJSON); err != nil {
		t.Fatal(err)
	}
	for _, row := range silosJSON.Silos {
		if row.SiloID != cluster.FormatID(bad.SiloID()) {
			continue
		}
		if row.Clock == nil || row.Clock.Fitness != "unfit" || row.Clock.OffsetMS > float64(skewed/time.Millisecond)+1000 {
			t.Fatalf("/v1/silos of a fit silo shows the skewed silo's clock as %+v, want unfit about %v", row.Clock, skewed)
		}
	}

	// It stays without leadership.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if onBad, _ := leaders(); onBad > 0 {
			t.Fatalf("the skewed silo leads %d partitions again", onBad)
		}
	}
}

// get is a GET's status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// grepLines is the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestALoneSiloIsClockFitWhateverItsClock: a zero Config.MaxClockOffset takes
// DefaultMaxClockOffset and a negative one stays (the judgment disabled); a silo with no peer,
// on a clock an hour off, is fit and ready, its clock probing nobody.
func TestALoneSiloIsClockFitWhateverItsClock(t *testing.T) {
	for _, tc := range []struct{ given, want time.Duration }{{0, DefaultMaxClockOffset}, {2 * time.Second, 2 * time.Second}, {-1, -1}} {
		c, err := Config{InsecureDev: true, MaxClockOffset: tc.given}.withDefaults()
		if err != nil || c.MaxClockOffset != tc.want {
			t.Fatalf("MaxClockOffset %v: %v (%v), want %v", tc.given, c.MaxClockOffset, err, tc.want)
		}
	}
	s := startSilo(t, t.TempDir(), func(c *Config) { c.Clock = offsetClock{time.Hour} })
	if v := s.ClockVerdict(); v.Fitness != clockoffset.Fit || v.Measured != 0 {
		t.Fatalf("a lone silo's verdict: %+v, want fit with nothing measured", v)
	}
	if status, body := get(t, "http://"+s.AdminAddress()+"/readyz"); status != http.StatusOK {
		t.Fatalf("a lone silo's /readyz: %d %s", status, body)
	}
}
