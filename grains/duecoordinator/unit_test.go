package duecoordinator

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/grains/input"
)

func TestConfigDefaults(t *testing.T) {
	fake := clock.NewFake(t0)
	cfg := Config{Clock: fake, RefsPerRound: 10_000}.withDefaults()
	if cfg.RefsPerRound != MaxRefsPerRound || cfg.EmitMax != DefaultEmitMax || cfg.Workers != DefaultWorkers ||
		cfg.SafetyRescan != DefaultSafetyRescan || cfg.RequestTimeout != DefaultRequestTimeout || cfg.Logger == nil {
		t.Fatalf("defaults %+v", cfg)
	}
	if !strings.HasPrefix(cfg.CommandIDPrefix, "coordinator-") {
		t.Fatalf("default prefix %q", cfg.CommandIDPrefix)
	}
	if c := (Config{}).withDefaults().Clock; c != clock.Real() {
		t.Fatalf("default clock is %T, not clock.Real()", c)
	}
}

func TestFailureBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := failureBackoff(i + 1); got != w {
			t.Errorf("failureBackoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestRelativeInstant(t *testing.T) {
	observed := t0
	// The partition's clock is 10 s behind: its instant t0+60s is 70 s after its logged t0-10s.
	if got := relativeInstant(observed, micros(t0.Add(time.Minute)), micros(t0.Add(-10*time.Second))); !got.Equal(t0.Add(70 * time.Second)) {
		t.Fatalf("relativeInstant = %v", got)
	}
	if got := relativeInstant(observed, micros(t0.Add(time.Minute)), 0); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("without a logged time = %v", got)
	}
}

// TestStuckHintIsDeferred: a due-now hint naming a ref on backoff (a partition reports its
// earliest due instant after every commit) is coalesced stuckHintDelay ahead; other due-now
// hints queue the partition at once.
func TestStuckHintIsDeferred(t *testing.T) {
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	b := setup(t, options{limits: limits, cfg: func(c *Config) { c.SafetyRescan = time.Hour }})
	fillLane(b, lane("stuck"), 1)
	b.apply(0, configure(lane("stuck"), scheduleID(1), every(t0.Add(-time.Hour), time.Hour), 0))
	b.start(0)
	s := b.c.Stats()
	if s.RefsSkipped != 1 || !s.Partitions[0].TimerAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("stats %+v, want the stuck ref on a 1 s backoff", s)
	}
	stuck := micros(t0.Add(-time.Hour))
	b.clock.Advance(100 * time.Millisecond)
	scans := b.calls("scan", 0)
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 0, NextDueAtUnixMicros: stuck})
	b.settle()
	if got := b.c.Stats().Partitions[0].TimerAt; !got.Equal(t0.Add(time.Second)) || b.calls("scan", 0) != scans {
		t.Fatalf("a hint naming the stuck ref scanned or moved the timer to %v", got.Sub(t0))
	}
	b.c.Notify(&orreryv1.NextDueNotice{Partition: 0, NextDueAtUnixMicros: stuck + 1})
	b.settle()
	if got := b.calls("scan", 0); got != scans+1 {
		t.Fatalf("a new due-now hint made %d scans, want 1", got-scans)
	}
}

// scripted is a Partitions that answers from functions, for protocol violations the twin
// never commits.
type scripted struct {
	scan    func() *orreryv1.ScanDueReply
	command func(req *orreryv1.CommandRequest) *orreryv1.CommandReply
}

func (s scripted) ScanDue(context.Context, int, *orreryv1.ScanDueRequest) (*orreryv1.ScanDueReply, error) {
	return s.scan(), nil
}

func (s scripted) Command(_ context.Context, _ int, req *orreryv1.CommandRequest) (*orreryv1.CommandReply, error) {
	return s.command(req), nil
}

// TestProtocolViolationsBackOff: a scan page that makes no progress and a receipt for another
// command fail the round (backoff) instead of looping.
func TestProtocolViolationsBackOff(t *testing.T) {
	ref := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane("a"), Id: scheduleID(1), Token: 1, DueAtUnixMicros: micros(t0)}
	for name, p := range map[string]scripted{
		"more without refs": {scan: func() *orreryv1.ScanDueReply { return &orreryv1.ScanDueReply{More: true} }},
		"foreign receipt": {
			scan: func() *orreryv1.ScanDueReply { return &orreryv1.ScanDueReply{Refs: []*orreryv1.DueRef{ref}} },
			command: func(*orreryv1.CommandRequest) *orreryv1.CommandReply {
				receipt, _ := proto.Marshal(&orreryv1.Receipt{CommandId: "someone-else"})
				return &orreryv1.CommandReply{Receipt: receipt}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			fake := clock.NewFake(t0)
			c := New(Config{Partitions: p, Clock: fake, Logger: slog.New(slog.DiscardHandler)})
			t.Cleanup(c.Stop)
			c.Start(context.Background())
			c.SetOwned([]int{0})
			<-c.idle()
			s := c.Stats()
			if s.Errors != 1 || s.Rounds != 1 || !s.Partitions[0].TimerAt.Equal(t0.Add(time.Second)) {
				t.Fatalf("stats %+v, want one failed round and a 1 s backoff", s)
			}
		})
	}
}
