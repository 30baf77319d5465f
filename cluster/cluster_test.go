package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/internal/testkit"
)

// echoKind answers a StringValue with "<member id>|<value>". The values "fail" and
// "unavailable" answer with the matching *cluster.GrainErrorResponse instead.
func echoKind() *protocluster.Kind {
	return protocluster.NewKind("echo", actor.PropsFromFunc(func(ctx actor.Context) {
		msg, ok := ctx.Message().(*wrapperspb.StringValue)
		if !ok {
			return
		}
		switch msg.GetValue() {
		case "fail":
			ctx.Respond(protocluster.NewGrainErrorResponse(protocluster.ErrorReason_INVALID_ARGUMENT, "asked to fail"))
		case "unavailable":
			ctx.Respond(protocluster.NewGrainErrorResponse(protocluster.ErrorReason_UNAVAILABLE, "not now"))
		default:
			ctx.Respond(wrapperspb.String(ctx.ActorSystem().ID + "|" + msg.GetValue()))
		}
	}))
}

// node is one started member or client, stopped once at cleanup or earlier by kill.
type node struct {
	c    *protocluster.Cluster
	p    *Provider
	once sync.Once
}

// kill makes the node look crashed to its peers: memberlist stops without leaving and the
// actor transport stops listening. It deliberately avoids cluster.Cluster.Shutdown, which
// first sets protoactor's "gracefully left" gossip state; that state can still reach peers
// through this node's outgoing connections and make them drop it without memberlist.
func (n *node) kill() {
	n.once.Do(func() {
		_ = n.p.Shutdown(false)
		n.c.ActorSystem.Shutdown()
		n.c.Remote.Shutdown(false)
	})
}

// stop leaves memberlist first (so peers drop the node at once) and then tears protoactor
// down without its 2 s graceful sleep.
func (n *node) stop() {
	n.once.Do(func() {
		_ = n.p.Shutdown(true)
		_ = Shutdown(n.c, n.p, false)
	})
}

func (n *node) id() string { return n.c.ActorSystem.ID }

// topology returns the member ids of n's current protoactor topology, sorted.
func (n *node) topology() []string {
	var ids []string
	for _, m := range n.p.Topology() {
		ids = append(ids, m.Id)
	}
	slices.Sort(ids)
	return ids
}

func startNode(t *testing.T, client bool, seeds ...string) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := MemberConfig{
		Name:           "orrery-test",
		Host:           "127.0.0.1",
		Port:           0,
		Gossip:         ProviderConfig{BindHost: "127.0.0.1", Seeds: seeds},
		RequestTimeout: time.Second,
		Logger:         testLogger(t),
		LogLevel:       slog.LevelWarn,
	}
	start := NewMember
	if client {
		start = NewClient
	} else {
		cfg.Kinds = []*protocluster.Kind{echoKind()}
	}
	c, p, err := start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{c: c, p: p}
	t.Cleanup(n.stop)
	if !strings.HasPrefix(c.ActorSystem.Address(), "127.0.0.1:") || strings.HasSuffix(c.ActorSystem.Address(), ":0") {
		t.Fatalf("actor transport address %q is not the bound loopback port", c.ActorSystem.Address())
	}
	return n
}

// echo calls identity's echo grain through via and returns the id of the member that answered.
func echo(t *testing.T, via *node, identity string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, err := actors.Call(ctx, via.c, identity, "echo", wrapperspb.String("ping"), actors.CallOptions{AttemptTimeout: time.Second})
	if err != nil {
		t.Fatalf("call %s: %v", identity, err)
	}
	host, value, ok := strings.Cut(reply.(*wrapperspb.StringValue).GetValue(), "|")
	if !ok || value != "ping" {
		t.Fatalf("call %s: reply %v", identity, reply)
	}
	return host
}

// TestIntegrationTwoMembersAndClient runs two members and a client in this process: topology, calls,
// Call's failure modes, then a member crash and failover to the survivor.
func TestIntegrationTwoMembersAndClient(t *testing.T) {
	a := startNode(t, false)
	b := startNode(t, false, a.p.GossipAddress())
	client := startNode(t, true, b.p.GossipAddress(), a.p.GossipAddress())

	both := []string{a.id(), b.id()}
	slices.Sort(both)
	testkit.Eventually(t, 10*time.Second, "every node to see exactly the two members", func() bool {
		return slices.Equal(a.topology(), both) && slices.Equal(b.topology(), both) && slices.Equal(client.topology(), both)
	})

	// The client reaches grains on both members; remember one hosted by b.
	var onB string
	for i := 0; i < 64 && onB == ""; i++ {
		identity := fmt.Sprintf("g%d", i)
		switch host := echo(t, client, identity, 10*time.Second); host {
		case b.id():
			onB = identity
		case a.id():
		default:
			t.Fatalf("grain %s answered from %q, not a member", identity, host)
		}
	}
	if onB == "" {
		t.Fatal("no identity out of 64 was placed on the second member")
	}

	t.Run("no member hosts the kind", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		jitterDraws := 0
		_, err := actors.Call(ctx, client.c, "x", "absent", wrapperspb.String("ping"), actors.CallOptions{
			MaxAttempts: 3,
			Backoff:     actors.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2},
			Jitter:      func() float64 { jitterDraws++; return 0 },
		})
		if !errors.Is(err, orrery.ErrUnavailable) {
			t.Fatalf("err = %v, want Unavailable", err)
		}
		took := time.Since(start)
		// Two waits with jitter 0: half of 100 ms, then half of 200 ms.
		if jitterDraws != 2 || took < 150*time.Millisecond {
			t.Fatalf("%d jitter draws, %v elapsed; want 2 draws and at least 150 ms", jitterDraws, took)
		}
		if took > 5*time.Second {
			t.Fatalf("giving up took %v", took)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := actors.Call(ctx, client.c, "x", "absent", wrapperspb.String("ping"), actors.CallOptions{})
		if !errors.Is(err, orrery.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("a 500 ms deadline took %v", took)
		}
	})

	t.Run("grain errors", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := actors.Call(ctx, client.c, onB, "echo", wrapperspb.String("fail"), actors.CallOptions{})
		var grainErr *protocluster.GrainErrorResponse
		if !errors.Is(err, orrery.ErrInternal) || !errors.As(err, &grainErr) || grainErr.GetReason() != protocluster.ErrorReason_INVALID_ARGUMENT {
			t.Fatalf("err = %v, want Internal wrapping an INVALID_ARGUMENT grain error", err)
		}
		attempts := 0
		_, err = actors.Call(ctx, client.c, onB, "echo", wrapperspb.String("unavailable"), actors.CallOptions{
			MaxAttempts: 3,
			OnAttempt:   func(int, error) { attempts++ },
		})
		if !errors.Is(err, orrery.ErrUnavailable) || !errors.As(err, &grainErr) || attempts != 3 {
			t.Fatalf("err = %v after %d attempts, want Unavailable after 3", err, attempts)
		}
	})

	// Crash b: its memberlist stops without leaving. A call issued right away must succeed on
	// a once the survivor and the client have dropped b (attempts against b time out or stall
	// in disthash's 5 s lookup and are abandoned at the attempt timeout).
	start := time.Now()
	b.kill()
	type outcome struct {
		host string
		took time.Duration
	}
	failover := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		reply, err := actors.Call(ctx, client.c, onB, "echo", wrapperspb.String("ping"), actors.CallOptions{AttemptTimeout: time.Second})
		if err != nil {
			failover <- outcome{host: err.Error(), took: time.Since(start)}
			return
		}
		host, _, _ := strings.Cut(reply.(*wrapperspb.StringValue).GetValue(), "|")
		failover <- outcome{host: host, took: time.Since(start)}
	}()
	onA := []string{a.id()}
	testkit.Eventually(t, 20*time.Second, "the survivor to drop the crashed member", func() bool {
		return slices.Equal(a.topology(), onA)
	})
	detected := time.Since(start)
	testkit.Eventually(t, 20*time.Second, "the client to drop the crashed member", func() bool {
		return slices.Equal(client.topology(), onA)
	})
	clientDetected := time.Since(start)
	got := <-failover
	if got.host != a.id() {
		t.Fatalf("the call issued at the crash got %q, want an answer from the survivor %s", got.host, a.id())
	}
	t.Logf("crash detected by the survivor after %v, by the client after %v; a call issued at the crash answered from the survivor after %v",
		detected, clientDetected, got.took)
	if host := echo(t, client, onB, 10*time.Second); host != a.id() {
		t.Fatalf("after failover %s answered from %s, want the survivor %s", onB, host, a.id())
	}
	if isClosed(a.p.Fenced()) {
		t.Fatalf("the survivor fenced itself: %v", a.p.FenceCause())
	}
}

func TestNewClientRejectsKinds(t *testing.T) {
	t.Parallel()
	_, _, err := NewClient(context.Background(), MemberConfig{Name: "x", Kinds: []*protocluster.Kind{echoKind()}})
	if err == nil {
		t.Fatal("a client with kinds was accepted")
	}
}

func TestIntegrationNewMemberGivesUpWithoutSeeds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err := NewMember(ctx, MemberConfig{
		Name:   "lonely",
		Gossip: ProviderConfig{Seeds: []string{unreachableSeed}},
		Logger: testLogger(t),
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
}
