package silo

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestBelowTheDiskFloorTheSiloIsNotReadyAndCountsRefusals: while the store's disk is below its
// free-space floor, /readyz answers 503 naming the floor, commands are refused Unavailable and
// counted on /metrics (orrery_store_refused_commands_total), and the silo logs the change once;
// with room again it is ready and takes commands, and logs that once too.
func TestBelowTheDiskFloorTheSiloIsNotReadyAndCountsRefusals(t *testing.T) {
	t.Parallel()
	var free atomic.Uint64
	free.Store(4 << 30)
	logs := &testkit.Buffer{}
	s := startSilo(t, t.TempDir(), func(cfg *Config) {
		cfg.Store.MinFreeBytes = 1 << 30
		cfg.Store.FreeBytesFunc = func(string) (uint64, error) { return free.Load(), nil }
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	// The silo stops with room on the disk: below the floor its store is left open
	// (persistence.SiloStore.Close).
	t.Cleanup(func() { free.Store(4 << 30) })
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ns", Queue: "q", Key: "k"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "before"}); err != nil {
		t.Fatal(err)
	}
	free.Store(1 << 20)
	testkit.Eventually(t, 10*time.Second, "/readyz 503 below the floor", func() bool {
		code, body := getJSON(t, "http://"+s.AdminAddress()+"/readyz")
		reason, _ := body["reason"].(string)
		return code == http.StatusServiceUnavailable && strings.Contains(reason, "below the floor")
	})
	short, stop := context.WithTimeout(ctx, 2*time.Second)
	_, err := s.Client().Enqueue(short, &orreryv1.Enqueue{Lane: lane, Id: "below"})
	stop()
	if err == nil || !strings.Contains(err.Error(), "below the floor") {
		t.Fatalf("an enqueue below the floor answered %v, want an error naming the floor", err)
	}
	if got := scrapeMetrics(t, s).sum(t, "orrery_store_refused_commands_total"); got < 1 {
		t.Errorf("orrery_store_refused_commands_total = %v after a refused command, want at least 1", got)
	}
	free.Store(4 << 30)
	waitReady(t, s)
	testkit.Eventually(t, 10*time.Second, "an enqueue once the disk has room again", func() bool {
		_, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "after"})
		return err == nil || !errors.Is(err, orrery.ErrUnavailable)
	})
	if below, back := strings.Count(logs.String(), "below its free-space floor"), strings.Count(logs.String(), "back above its free-space floor"); below != 1 || back != 1 {
		t.Errorf("logged going below the floor %d times and coming back %d times, want once each:\n%s", below, back, logs)
	}
}
