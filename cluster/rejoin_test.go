package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestClientRejoinsWhenItsOnlySiloComesBack: a client's only silo is killed, and it restarts
// (a new member id, its silo and cluster ids from its store) on the same gossip address without
// seeds, so it knows nothing of the client. memberlist never contacts a node it declared dead again; the client must join its
// seeds again by itself and see the new silo.
func TestClientRejoinsWhenItsOnlySiloComesBack(t *testing.T) {
	t.Parallel()
	silo, _ := startFake(t, ProviderConfig{}, "rejoin", false)
	seed := silo.GossipAddress()
	_, portText, _ := net.SplitHostPort(seed)
	port, _ := strconv.Atoi(portText)
	client, clientTop := startFake(t, ProviderConfig{Seeds: []string{seed}}, "rejoin", true)
	testkit.Eventually(t, 5*time.Second, "the client to see the silo", func() bool {
		ids, _ := clientTop.snapshot()
		return slices.Equal(ids, []string{silo.MemberID()})
	})

	if err := silo.Shutdown(false); err != nil { // as after SIGKILL: no leave
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the client to drop the killed silo", func() bool {
		ids, _ := clientTop.snapshot()
		return len(ids) == 0
	})
	restarted, _ := startFake(t, ProviderConfig{BindPort: port, SiloID: silo.SiloID(), ClusterID: silo.ClusterID()}, "rejoin", false)
	testkit.Eventually(t, 15*time.Second, "the client to see the restarted silo", func() bool {
		ids, _ := clientTop.snapshot()
		return slices.Equal(ids, []string{restarted.MemberID()})
	})
	if client.JoinError() != nil {
		t.Errorf("JoinError after a successful rejoin: %v", client.JoinError())
	}
}

// silentPartitionKind is a partition kind whose grains never answer; each command request they
// get is announced on arrived.
func silentPartitionKind(arrived chan<- struct{}) *protocluster.Kind {
	return protocluster.NewKind(PartitionKind, actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*orreryv1.CommandRequest); ok {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	}))
}

// TestCallsInFlightEndWhenTheirMemberDies: a call waiting on a member that dies is ended with
// Unavailable as soon as the actor transport loses its connection to the member, not when
// memberlist declares it dead and the dead-peer grace has passed (the member stays in the
// topology until then), nor at its attempt timeout, so a long-poll receive to a crashed silo is
// retried (on its replacement) at once.
func TestCallsInFlightEndWhenTheirMemberDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	arrived := make(chan struct{}, 1)
	member, provider, err := NewMember(ctx, MemberConfig{Name: "orrery-leave", Kinds: []*protocluster.Kind{silentPartitionKind(arrived)},
		Gossip: ProviderConfig{}, Logger: testLogger(t), LogLevel: slog.LevelError})
	if err != nil {
		t.Fatal(err)
	}
	victim := &node{c: member, p: provider}
	t.Cleanup(victim.stop)
	caller := startNodeIn(t, "orrery-leave", provider.GossipAddress())

	transport := NewPartitionTransport(caller.c, 1, time.Minute)
	defer transport.Close()
	testkit.Eventually(t, 10*time.Second, "the caller to see the member", func() bool { return len(caller.topology()) == 1 })
	done := make(chan error, 1)
	go func() {
		_, err := transport.Command(ctx, 0, &orreryv1.CommandRequest{Batch: &orreryv1.Batch{CommandId: "c"}})
		done <- err
	}()
	select {
	case <-arrived: // the request waits on the silent grain
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the grain")
	}
	victim.kill()
	killed := time.Now()
	select {
	case err := <-done:
		ended := time.Since(killed)
		t.Logf("call ended %v after the kill: %v", ended.Round(time.Millisecond), err)
		if !errors.Is(err, orrery.ErrUnavailable) || !errors.Is(err, errConnectionLost) {
			t.Fatalf("call ended with %v, want Unavailable because the connection to the member was lost", err)
		}
		if grace := caller.p.deadGrace(); ended >= grace {
			t.Fatalf("the call ended %v after the kill, not before the dead member could leave the topology (grace %v)", ended, grace)
		}
		if len(caller.topology()) != 1 {
			t.Log("the dead member had already left the caller's topology")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call to the dead member was still waiting 15 s after the kill (attempt timeout 1 min)")
	}
}

// startNodeIn starts a client node of clusterName joined through seed, stopped at cleanup.
func startNodeIn(t *testing.T, clusterName, seed string) *node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, p, err := NewClient(ctx, MemberConfig{Name: clusterName, Gossip: ProviderConfig{Seeds: []string{seed}},
		Logger: testLogger(t), LogLevel: slog.LevelError})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{c: c, p: p}
	t.Cleanup(n.stop)
	return n
}
