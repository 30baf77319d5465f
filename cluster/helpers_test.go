package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
)

// This package's tests run in-process on loopback with ports chosen at run time. The
// TestIntegration* tests start protoactor clusters and must run without -race: protoactor-go's
// cluster code has known data races (MemberList.Members and BlockList.IsBlocked read without
// their locks, disthash's rendezvous is replaced without one, every Remote.Start calls
// grpclog.SetLoggerV2) that the detector reports whatever this package does. The other tests
// use memberlist only and are race-clean: go test -race -skip TestIntegration ./cluster/...

// testLogger returns a logger that writes to the test's log until the test ends and discards
// afterwards (protoactor goroutines outlive their test and would otherwise log into a finished
// test, which panics).
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Logf("%s", b)
	}
	return len(b), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}

// fakeTopology stands in for protoactor's MemberList and BlockList in provider unit tests.
type fakeTopology struct {
	selfID string

	mu       sync.Mutex
	blocked  map[string]bool
	latest   []string
	count    int
	dropSelf bool
}

func (f *fakeTopology) publish(members []*protocluster.Member) []*protocluster.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	var accepted []*protocluster.Member
	for _, m := range members {
		if !f.blocked[m.Id] && !(f.dropSelf && m.Id == f.selfID) {
			ids = append(ids, m.Id)
			accepted = append(accepted, m)
		}
	}
	slices.Sort(ids)
	f.latest, f.count = ids, f.count+1
	return accepted
}

func (f *fakeTopology) isBlocked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked[id]
}

func (f *fakeTopology) block(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked[id] = true
}

func (f *fakeTopology) setDropSelf() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropSelf = true
}

// snapshot returns the last published ids and how many publishes happened.
func (f *fakeTopology) snapshot() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.latest), f.count
}

// lists reports whether the last published ids hold id.
func (f *fakeTopology) lists(id string) bool {
	ids, _ := f.snapshot()
	return slices.Contains(ids, id)
}

var fakeIDs atomic.Int64

// startFake starts a provider on loopback against a fakeTopology, shut down at cleanup.
func startFake(t *testing.T, cfg ProviderConfig, clusterName string, client bool) (*Provider, *fakeTopology) {
	t.Helper()
	p, top, env := newFake(t, cfg, clusterName, client)
	if err := p.start(env); err != nil {
		t.Fatal(err)
	}
	return p, top
}

// newFake returns an unstarted provider, its fakeTopology and the environment to start it
// with; it is shut down at cleanup.
func newFake(t *testing.T, cfg ProviderConfig, clusterName string, client bool) (*Provider, *fakeTopology, *environment) {
	t.Helper()
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	p, err := NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := fakeIDs.Add(1)
	id := fmt.Sprintf("node-%d", n)
	top := &fakeTopology{selfID: id, blocked: map[string]bool{}}
	var kinds []string
	if !client {
		kinds = []string{"echo"}
	}
	env := &environment{
		clusterName: clusterName, selfID: id, host: "127.0.0.1", port: 20000 + int(n),
		kinds: kinds, client: client, publish: top.publish, blocked: top.isBlocked,
	}
	t.Cleanup(func() { _ = p.Shutdown(false) })
	return p, top, env
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
