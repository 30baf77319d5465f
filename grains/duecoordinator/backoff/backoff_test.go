package backoff

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

func TestBackoffDoublesAndForgets(t *testing.T) {
	var s Backoff
	l := &orreryv1.Lane{Namespace: "ns", Queue: "q", Key: "k"}
	ref := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: l, Id: "x", Token: 1, DueAtUnixMicros: 42}
	newer := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: l, Id: "x", Token: 2, DueAtUnixMicros: 42}
	now := time.Unix(1_700_000_000, 0)
	var waits []time.Duration
	for range 11 {
		s.Skip(ref, now)
		at := s.NextRetry(now)
		waits = append(waits, at.Sub(now))
		if got := s.Filter([]*orreryv1.DueRef{ref, newer}, now); len(got) != 1 || got[0] != newer {
			t.Fatalf("filter kept %v, want only the newer token", got)
		}
		if got := s.StuckDue(now); len(got) != 1 || got[0] != 42 {
			t.Fatalf("stuckDue = %v", got)
		}
		if retry, ok := s.RetryAt(ref); !ok || !retry.Equal(at) {
			t.Fatalf("RetryAt = %v %v, want %v", retry, ok, at)
		}
		now = at
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		if waits[i] != w*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	if got := s.Filter([]*orreryv1.DueRef{ref}, now); len(got) != 1 {
		t.Fatal("ref still skipped at its retry instant")
	}
	if !s.NextRetry(now).IsZero() || len(s.StuckDue(now)) != 0 {
		t.Fatal("an elapsed entry still counts")
	}
	s.Prune(now.Add(BackoffForget))
	if s.Len() != 1 {
		t.Fatal("pruned before BackoffForget")
	}
	s.Prune(now.Add(BackoffForget + time.Microsecond))
	if s.Len() != 0 {
		t.Fatal("not pruned after BackoffForget")
	}
	s.Skip(ref, now)
	s.Clear(ref)
	if s.Len() != 0 {
		t.Fatal("Clear kept the entry")
	}
}
