package raftnet

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/replication"
)

// message returns a distinguishable Raft message of group 3 from replica from to replica to.
func message(from, to, index uint64) replication.Message {
	return replication.Message{Group: 3, Raft: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Commit: proto.Uint64(index)}}
}

// gate blocks an outbox's first flush until open.
type gate struct {
	once, opened sync.Once
	entered      chan struct{}
	release      chan struct{}
}

// newGate returns a closed gate, opened at the end of the test at the latest (the silos'
// Close waits for their outboxes).
func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.opened.Do(func() { close(g.release) }) }

func (g *gate) hook(uint64) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
}

// Many Sends that accumulate while the outbox is busy travel as one remote message, in order.
func TestIntegrationSendsBatchPerDestination(t *testing.T) {
	n := newNet(t)
	a, b := n.start(1, Config{}), n.start(2, Config{})
	rec := &recorder{}
	b.transport.SetReceiver(rec)
	g := newGate(t)
	a.transport.beforeFlush = g.hook
	a.transport.Send(2, []replication.Message{message(1, 2, 0)})
	<-g.entered // the outbox woke for the first Send and waits before taking anything
	for i := uint64(1); i < 10; i++ {
		a.transport.Send(2, []replication.Message{message(1, 2, i)})
	}
	g.open()
	testkit.Eventually(t, 10*time.Second, "10 messages", func() bool { _, m := rec.received(); return m == 10 })
	batches, _ := rec.received()
	if batches != 1 || a.transport.Stats().Batches != 1 {
		t.Fatalf("10 Sends arrived in %d batches (sent %d), want 1", batches, a.transport.Stats().Batches)
	}
	for i, m := range rec.batches[0] {
		if m.Group != 3 || m.Raft.GetCommit() != uint64(i) || m.Raft.GetFrom() != 1 || m.Raft.GetType() != raftpb.MsgHeartbeat {
			t.Fatalf("message %d arrived as group %d %v", i, m.Group, m.Raft)
		}
	}
}

// A full outbox drops what does not fit, counted, instead of blocking Send.
func TestIntegrationFullOutboxDrops(t *testing.T) {
	n := newNet(t)
	a, b := n.start(1, Config{OutboxMessages: 8}), n.start(2, Config{})
	rec := &recorder{}
	b.transport.SetReceiver(rec)
	g := newGate(t)
	a.transport.beforeFlush = g.hook
	a.transport.Send(2, []replication.Message{message(1, 2, 0)})
	<-g.entered
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := uint64(1); i < 20; i++ {
			a.transport.Send(2, []replication.Message{message(1, 2, i)})
		}
	}()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("Send blocked on a full outbox")
	}
	if got := a.transport.Stats().Dropped; got != 12 {
		t.Fatalf("dropped %d messages, want 12 (20 sent, 8 fit)", got)
	}
	g.open()
	testkit.Eventually(t, 10*time.Second, "8 messages", func() bool { _, m := rec.received(); return m == 8 })
	time.Sleep(100 * time.Millisecond) // nothing more comes
	if _, m := rec.received(); m != 8 {
		t.Fatalf("received %d messages, want 8", m)
	}
}

// Cut drops the traffic between two silos both ways, from one side's Faults; Heal restores it.
func TestIntegrationCutDropsBothWaysAndHealRestores(t *testing.T) {
	n := newNet(t)
	a, b := n.start(1, Config{}), n.start(2, Config{})
	recA, recB := &recorder{}, &recorder{}
	a.transport.SetReceiver(recA)
	b.transport.SetReceiver(recB)
	a.faults.Cut(2)
	a.transport.Send(2, []replication.Message{message(1, 2, 1)})
	b.transport.Send(1, []replication.Message{message(2, 1, 1)})
	// Both messages reached the cut: a's outbox dropped one, a's actor the other.
	testkit.Eventually(t, 10*time.Second, "both messages dropped", func() bool { return a.transport.Stats().Faulted == 2 })
	if _, m := recB.received(); m != 0 {
		t.Fatalf("silo 2 received %d messages across the cut", m)
	}
	if _, m := recA.received(); m != 0 {
		t.Fatalf("silo 1 received %d messages across the cut", m)
	}
	a.faults.Heal(2)
	a.transport.Send(2, []replication.Message{message(1, 2, 2)})
	b.transport.Send(1, []replication.Message{message(2, 1, 2)})
	testkit.Eventually(t, 10*time.Second, "messages after Heal", func() bool {
		_, ma := recA.received()
		_, mb := recB.received()
		return ma == 1 && mb == 1
	})

	// Cutting a silo's own id cuts it off from everyone.
	c := n.start(3, Config{})
	recC := &recorder{}
	c.transport.SetReceiver(recC)
	a.faults.Cut(1)
	a.transport.Send(3, []replication.Message{message(1, 3, 1)})
	c.transport.Send(1, []replication.Message{message(3, 1, 1)})
	testkit.Eventually(t, 10*time.Second, "both messages dropped", func() bool { return a.transport.Stats().Faulted == 4 })
	if _, m := recC.received(); m != 0 {
		t.Fatalf("silo 3 received %d messages from a silo cut off", m)
	}
	if _, m := recA.received(); m != 1 {
		t.Fatalf("silo 1, cut off, received %d messages, want the 1 from before", m)
	}
}

// Delay holds the traffic between two silos back by at least the delay, both ways.
func TestIntegrationDelayHoldsTrafficBack(t *testing.T) {
	n := newNet(t)
	a, b := n.start(1, Config{}), n.start(2, Config{})
	recA, recB := &recorder{}, &recorder{}
	a.transport.SetReceiver(recA)
	b.transport.SetReceiver(recB)
	const delay = 300 * time.Millisecond
	a.faults.Delay(2, delay)
	for _, dir := range []struct {
		from *silo
		to   uint64
		rec  *recorder
	}{{a, 2, recB}, {b, 1, recA}} {
		start := time.Now()
		dir.from.transport.Send(dir.to, []replication.Message{message(dir.from.id, dir.to, 1)})
		testkit.Eventually(t, 10*time.Second, "the delayed message", func() bool { _, m := dir.rec.received(); return m == 1 })
		if took := time.Since(start); took < delay {
			t.Fatalf("message %d→%d arrived after %v, before the %v delay", dir.from.id, dir.to, took, delay)
		}
	}
}

// A vote or pre-vote request in a group whose configuration here no longer counts its sender
// (Config.Counts) is delivered and answered with a RaftRemoved naming the group, once per
// batch; other messages from it, and requests in groups that count it, are not.
func TestIntegrationAnUncountedCampaignerIsToldItWasRemoved(t *testing.T) {
	n := newNet(t)
	type notice struct {
		from   uint64
		groups []int
	}
	notices := make(chan notice, 8)
	leader := n.start(1, Config{Counts: func(group int, replica uint64) bool { return group != 5 || replica != 2 }})
	removed := n.start(2, Config{OnRemoved: func(from uint64, groups []int) { notices <- notice{from, groups} }})
	rec := &recorder{}
	leader.transport.SetReceiver(rec)
	removed.transport.SetReceiver(&recorder{})
	vote := func(group int, kind raftpb.MessageType) replication.Message {
		return replication.Message{Group: group, Raft: &raftpb.Message{Type: kind.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(7)}}
	}
	heartbeat := message(2, 1, 1)
	heartbeat.Group = 5
	// Not a campaign in group 5, and a campaign in a group that counts replica 2: no notice.
	removed.transport.Send(1, []replication.Message{heartbeat, vote(4, raftpb.MsgPreVote)})
	removed.transport.Send(1, []replication.Message{vote(5, raftpb.MsgPreVote), vote(5, raftpb.MsgVote)})
	select {
	case got := <-notices:
		if got.from != 1 || len(got.groups) != 1 || got.groups[0] != 5 {
			t.Fatalf("RaftRemoved from %d naming %v, want from 1 naming [5]", got.from, got.groups)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no RaftRemoved for a pre-vote in a group that no longer counts its sender")
	}
	testkit.Eventually(t, 10*time.Second, "the 4 messages delivered", func() bool { _, m := rec.received(); return m == 4 })
	select {
	case got := <-notices:
		t.Fatalf("a second RaftRemoved: %+v", got)
	default:
	}

}

// A checksum a replica sends (SendChecksum) reaches the destination's OnChecksum with its
// sender, group, index and bytes; one a cut separates does not.
func TestIntegrationAChecksumReachesTheLeader(t *testing.T) {
	n := newNet(t)
	type report struct {
		from  uint64
		group int
		index uint64
		sum   []byte
	}
	reports := make(chan report, 8)
	leader := n.start(1, Config{OnChecksum: func(from uint64, group int, index uint64, sum []byte) { reports <- report{from, group, index, sum} }})
	follower := n.start(2, Config{})
	leader.transport.SetReceiver(&recorder{})
	follower.transport.SetReceiver(&recorder{})
	follower.transport.SendChecksum(1, 3, 42, []byte{0xab, 0xcd})
	select {
	case got := <-reports:
		if got.from != 2 || got.group != 3 || got.index != 42 || !bytes.Equal(got.sum, []byte{0xab, 0xcd}) {
			t.Fatalf("report %+v, want from 2, group 3, index 42, abcd", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no checksum report arrived")
	}
	follower.faults.Cut(1)
	follower.transport.SendChecksum(1, 3, 43, []byte{1})
	select {
	case got := <-reports:
		t.Fatalf("a report crossed a cut: %+v", got)
	case <-time.After(500 * time.Millisecond):
	}
}

// A clock probe (SendClockProbe) is answered by the probed silo's OnClockProbe, and the
// answer reaches the prober's OnClockReading with the probe's number, the answering silo's
// wall time and its verdict; across a cut neither goes.
func TestIntegrationAClockProbeIsAnsweredWithThePeersWallTime(t *testing.T) {
	n := newNet(t)
	type reading struct {
		from, probe uint64
		wall        time.Time
		fitness     orreryv1.ClockFitness
	}
	readings := make(chan reading, 8)
	peerWall := time.UnixMicro(1_700_000_000_123_456)
	prober := n.start(1, Config{OnClockReading: func(from, probe uint64, wall time.Time, fitness orreryv1.ClockFitness) {
		readings <- reading{from, probe, wall, fitness}
	}})
	peer := n.start(2, Config{OnClockProbe: func(from uint64) (time.Time, orreryv1.ClockFitness) {
		if from != 1 {
			t.Errorf("probe from %d, want 1", from)
		}
		return peerWall, orreryv1.ClockFitness_CLOCK_UNFIT
	}})
	prober.transport.SetReceiver(&recorder{})
	peer.transport.SetReceiver(&recorder{})
	prober.transport.SendClockProbe(2, 7, time.Now())
	select {
	case got := <-readings:
		if got.from != 2 || got.probe != 7 || !got.wall.Equal(peerWall) || got.fitness != orreryv1.ClockFitness_CLOCK_UNFIT {
			t.Fatalf("reading %+v, want from 2, probe 7, %v, unfit", got, peerWall)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no clock reading arrived")
	}
	prober.faults.Cut(2)
	prober.transport.SendClockProbe(2, 8, time.Now())
	select {
	case got := <-readings:
		t.Fatalf("a probe or its answer crossed a cut: %+v", got)
	case <-time.After(500 * time.Millisecond):
	}
}
