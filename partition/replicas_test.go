package partition

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/queue"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// replicaSet is three hosts, each with its own data root, whose groups were created with the
// three of them as voters (as if the cluster had already grown to them), connected by the in-memory network twin, which a goroutine keeps delivering.
type replicaSet struct {
	t     testing.TB
	net   *replication.Network
	ids   []uint64
	hosts map[uint64]*Host // the hosts that are up
	mu    sync.Mutex
	stop  chan struct{}
	done  chan struct{}
}

func newReplicaSet(t testing.TB) *replicaSet { return newReplicaSetWith(t, nil) }

// newReplicaSetWith is newReplicaSet with each host's configuration changed by configure
// (given the host's place, 0 to 2) before it opens.
func newReplicaSetWith(t testing.TB, configure func(i int, cfg *HostConfig)) *replicaSet {
	rs := &replicaSet{t: t, net: replication.NewNetwork(uint64(time.Now().UnixNano())), hosts: map[uint64]*Host{},
		stop: make(chan struct{}), done: make(chan struct{})}
	dirs := make([]string, 3)
	for i := range dirs {
		dirs[i] = t.TempDir()
		store, err := persistence.OpenSiloStore(persistence.SiloStoreDir(dirs[i]), 4, persistence.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		rs.ids = append(rs.ids, store.SiloID())
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range dirs {
		store, err := persistence.OpenSiloStore(persistence.SiloStoreDir(dir), 4, persistence.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		err = replication.Bootstrap(store.RaftLog(), rs.ids, []int{0, 1, 2, 3})
		if err == nil {
			err = store.SetClusterID(testClusterID)
		}
		if closeErr := store.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, dir := range dirs {
		cfg := HostConfig{DataRoot: dir, Partitions: 4, Logger: quiet}
		if configure != nil {
			configure(i, &cfg)
		}
		host, err := OpenHost(cfg)
		if err != nil {
			t.Fatal(err)
		}
		host.SetTransport(rs.net.Transport(rs.ids[i]))
		rs.mu.Lock()
		rs.hosts[rs.ids[i]] = host
		rs.mu.Unlock()
	}
	go rs.deliver()
	t.Cleanup(func() {
		close(rs.stop)
		<-rs.done
		for _, h := range rs.hosts {
			_ = h.Close()
		}
	})
	return rs
}

// deliver moves the network until the set stops.
func (rs *replicaSet) deliver() {
	defer close(rs.done)
	for {
		select {
		case <-rs.stop:
			return
		case <-time.After(time.Millisecond):
		}
		rs.net.Deliver(func(to uint64) replication.Receiver {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if h, ok := rs.hosts[to]; ok {
				return h.Receiver()
			}
			return nil
		})
	}
}

// kill closes a host as a crash would end it for the others: it is cut off and gone.
func (rs *replicaSet) kill(id uint64) {
	rs.mu.Lock()
	h := rs.hosts[id]
	delete(rs.hosts, id)
	rs.mu.Unlock()
	rs.net.Isolate(id)
	_ = h.Close()
}

// leader waits for a host that is up to lead partition n and returns it.
func (rs *replicaSet) leader(n int) *Host {
	rs.t.Helper()
	var leader *Host
	testkit.Eventually(rs.t, 30*time.Second, fmt.Sprintf("a host to lead partition %d", n), func() bool {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for _, h := range rs.hosts {
			if h.Leads(n) {
				leader = h
				return true
			}
		}
		return false
	})
	return leader
}

// grainOn starts partition n's grain, configured by cfg (its Host set; quiet logs unless it
// sets a Logger), in an actor system of its own, and stops both when the test ends.
func grainOn(t testing.TB, cfg Config, n int) (*actor.ActorSystem, *actor.PID) {
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	pid, err := system.Root.SpawnNamed(Props(cfg, n), fmt.Sprintf("partition-%d-%d", n, time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { system.Root.StopFuture(pid).Wait(); system.Shutdown() })
	return system, pid
}

// laneMessages reads the harness lane's message ids in host's partition-1 state.
func laneMessages(t *testing.T, host *Host) []string {
	var ids []string
	err := host.machines[1].state.View(func(r kv.Reader) error {
		msgs, _, err := queue.ListLane(r, lane, "", 100, queue.MaxLanePageBytes)
		for _, m := range msgs {
			ids = append(ids, m.GetId())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitMessages waits until host's partition 1 holds exactly want, in order.
func waitMessages(t *testing.T, host *Host, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := laneMessages(t, host)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("silo %d holds %v, want %v", host.SiloID(), got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestThreeHostsReplicateAndANewLeaderAnswersRetries: three hosts, each on its own store,
// replicate partition 1's commands to every replica's state; when the leader dies, another
// host leads, a retry of a command the old leader answered gets the byte-identical receipt
// from the new one, and new commands apply on the survivors at later logged times.
func TestThreeHostsReplicateAndANewLeaderAnswersRetries(t *testing.T) {
	rs := newReplicaSet(t)
	first := rs.leader(1)
	system, pid := grainOn(t, Config{Host: first}, 1)
	grantAll(t, system, pid, "alice")
	do := func(system *actor.ActorSystem, pid *actor.PID, id, message string) *orreryv1.CommandReply {
		return request[*orreryv1.CommandReply](t, system, pid, command(id, 0, enqueue(message)))
	}
	receipts := map[string][]byte{}
	var lastLogged int64
	for i := 1; i <= 5; i++ {
		reply := do(system, pid, fmt.Sprint("c", i), fmt.Sprint("m", i))
		lastLogged = receipt(t, reply).GetLoggedTimeUnixMicros()
		receipts[fmt.Sprint("c", i)] = reply.GetReceipt()
	}
	for _, h := range rs.hosts {
		waitMessages(t, h, "m1", "m2", "m3", "m4", "m5")
	}

	rs.kill(first.SiloID())
	second := rs.leader(1)
	if second == first {
		t.Fatal("the killed host still leads")
	}
	system2, pid2 := grainOn(t, Config{Host: second}, 1)
	var retried *orreryv1.CommandReply
	deadline := time.Now().Add(20 * time.Second)
	for { // the new leader may still be catching up with its own term's first entry
		retried = do(system2, pid2, "c3", "m3")
		if retried.GetError() == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !bytes.Equal(retried.GetReceipt(), receipts["c3"]) {
		t.Fatalf("retry of c3 through the new leader: %v, want the original receipt", retried)
	}
	next := receipt(t, do(system2, pid2, "c6", "m6"))
	if next.GetLoggedTimeUnixMicros() <= lastLogged {
		t.Fatalf("c6 logged at %d, not after c5 at %d", next.GetLoggedTimeUnixMicros(), lastLogged)
	}
	for _, h := range rs.hosts {
		waitMessages(t, h, "m1", "m2", "m3", "m4", "m5", "m6")
	}
}

// TestReadsAreAnsweredOnlyByAConfirmedLeader: with three voters, an inspection read is answered
// by the leader once a quorum confirms it leads; a follower refuses it, and so does a leader
// cut off from the others, instead of answering from a state the majority has moved past.
func TestReadsAreAnsweredOnlyByAConfirmedLeader(t *testing.T) {
	rs := newReplicaSet(t)
	first := rs.leader(1)
	system, pid := grainOn(t, Config{Host: first}, 1)
	grantAll(t, system, pid, "alice")
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c1", 0, enqueue("m1"))))
	inspectLane := func(system *actor.ActorSystem, pid *actor.PID) *orreryv1.InspectReply {
		return request[*orreryv1.InspectReply](t, system, pid, &orreryv1.InspectRequest{Principal: "alice", Target: &orreryv1.InspectRequest_Lane{Lane: &orreryv1.InspectLane{Lane: lane, MaxMessages: 10}}})
	}
	if page := inspectLane(system, pid); page.GetError() != nil || len(page.GetMessages()) != 1 {
		t.Fatalf("the leader's read: %v", page)
	}
	for id, h := range rs.hosts {
		if id == first.SiloID() {
			continue
		}
		fsys, fpid := grainOn(t, Config{Host: h}, 1)
		if page := inspectLane(fsys, fpid); !errors.Is(orrery.FromProto(page.GetError()), orrery.ErrUnavailable) {
			t.Fatalf("a follower answered a read: %v", page)
		}
	}

	rs.net.Isolate(first.SiloID())
	if page := inspectLane(system, pid); !errors.Is(orrery.FromProto(page.GetError()), orrery.ErrUnavailable) {
		t.Fatalf("a leader cut off from the others answered a read: %v", page)
	}
	rs.mu.Lock()
	delete(rs.hosts, first.SiloID()) // still running, but cut off: leader() must find another
	rs.mu.Unlock()
	t.Cleanup(func() { _ = first.Close() })
	second := rs.leader(1)
	system2, pid2 := grainOn(t, Config{Host: second}, 1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		reply := request[*orreryv1.CommandReply](t, system2, pid2, command("c2", 0, enqueue("m2")))
		if reply.GetError() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader refused c2: %v", orrery.FromProto(reply.GetError()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if page := inspectLane(system2, pid2); page.GetError() != nil || len(page.GetMessages()) != 2 {
		t.Fatalf("the new leader's read: %v", page)
	}
}
