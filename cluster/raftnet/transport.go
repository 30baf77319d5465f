package raftnet

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/replication"
)

// ActorName is the name of a silo's replication actor on its actor system.
const ActorName = "raftnet"

// PID returns the replication actor's PID on the silo whose actor address (host:port) is
// address: what an Addresses function returns.
func PID(address string) *actor.PID { return actor.NewPID(address, ActorName) }

// MaxBatchBytes bounds the encoded Raft messages of one RaftBatch; a message bigger than it
// travels alone.
const MaxBatchBytes = 1 << 20

// Defaults of Config.
const (
	DefaultOutboxMessages = 4096
	DefaultSnapshotWindow = 4
	DefaultStallTimeout   = 10 * time.Second
)

// Errors a snapshot stream fails with (wrapped in an *orrery.Error of code Unavailable).
var (
	// ErrUnknownReplica: Addresses knows no silo for the destination replica.
	ErrUnknownReplica = errors.New("no address for the replica")
	// ErrCut: a Faults cut separates the stream's ends.
	ErrCut = errors.New("traffic to the replica is cut")
	// ErrStalled: the stream made no progress within Config.StallTimeout.
	ErrStalled = errors.New("snapshot stream stalled")
	// ErrAborted: the other end gave up on the stream, or no longer knows it (it restarted).
	ErrAborted = errors.New("snapshot stream aborted")
	// ErrRefused: the receiver settled the snapshot with an error (it did not install it).
	ErrRefused = errors.New("snapshot refused")
	// ErrClosed: the transport was closed.
	ErrClosed = errors.New("raft transport closed")
	// ErrNoReceiver: the receiving transport has no Receiver yet.
	ErrNoReceiver = errors.New("no receiver attached")
)

// Config configures a Transport. Zero fields take their defaults.
type Config struct {
	// Self is this silo's replica id (its silo id); not zero.
	Self uint64
	// System is the silo's actor system, its remote started (remote.NewRemote, Start) with
	// gRPC message limits of at least a few MiB beyond the default window of chunks (the
	// input.MaxMessageBytes). The replication actor is spawned on it.
	System *actor.ActorSystem
	// Addresses resolves a replica id to its silo's replication actor (PID); false for a
	// replica it does not know: messages to it are dropped and snapshots to it fail.
	Addresses func(replica uint64) (*actor.PID, bool)
	// Faults are the failpoints applied to this silo's traffic (nil: none).
	Faults *Faults
	// Counts, when set, reports whether this silo's configuration of group still counts
	// replica, as far as this silo knows it authoritatively (it leads group): false only when
	// it leads group and replica is neither a voter nor a learner there. A vote or pre-vote
	// request from a replica the group does not count is answered with a RaftRemoved naming
	// the group (nil: never).
	Counts func(group int, replica uint64) bool
	// OnRemoved, when set, is called with the groups a RaftRemoved from replica from names:
	// from leads them and their configuration no longer counts this silo. It runs on the
	// replication actor and must not block.
	OnRemoved func(from uint64, groups []int)
	// OnChecksum, when set, is called with each ChecksumReport another silo's replica sends
	// (SendChecksum): its checksum of group's state at the CheckConsistency entry index. It runs
	// on the replication actor and must not block.
	OnChecksum func(from uint64, group int, index uint64, checksum []byte)
	// OnRepairRequest, when set, is called with each RepairRequest another silo sends
	// (SendRepairRequest): rebuild replica's state of group from this silo's. It runs on the
	// replication actor and must not block.
	OnRepairRequest func(from uint64, group int, replica uint64)
	// OnClockProbe, when set, answers each ClockProbe another silo sends (SendClockProbe) with
	// this silo's wall time and its verdict on its own clock, sent back as a ClockReading
	// behind the Raft messages queued there (nil: probes are not answered). It runs on the
	// replication actor and must not block.
	OnClockProbe func(from uint64) (wall time.Time, fitness orreryv1.ClockFitness)
	// OnClockReading, when set, is called with each ClockReading that answers a probe this
	// silo sent: the number of the probe, the answering silo's wall time and its verdict. It
	// runs on the replication actor and must not block.
	OnClockReading func(from, probe uint64, wall time.Time, fitness orreryv1.ClockFitness)
	// OutboxMessages bounds the Raft messages waiting to be sent to one replica; Send drops
	// what does not fit (Raft re-sends). Default DefaultOutboxMessages.
	OutboxMessages int
	// SnapshotWindow is how many chunks of a snapshot stream may be in flight beyond those the
	// receiver has consumed. Default DefaultSnapshotWindow.
	SnapshotWindow int
	// StallTimeout fails a snapshot stream, at either end, that made no progress for this
	// long: no chunk consumed or verdict on the sending side, no chunk arrived on the
	// receiving side. Default DefaultStallTimeout.
	StallTimeout time.Duration
}

// Stats counts a Transport's traffic since it started.
type Stats struct {
	// Batches is the number of RaftBatch messages sent, Messages the Raft messages in them.
	Batches, Messages uint64
	// Dropped counts the Raft messages Send dropped: outbox full, unknown replica, closed.
	Dropped uint64
	// Faulted counts the Raft and snapshot stream messages that Faults dropped, sent or
	// received.
	Faulted uint64
	// Received counts the Raft messages handed to the Receiver.
	Received uint64
}

// Transport is one silo's replication.Transport over protoactor remote, and its replication
// actor, which hands what other silos send to the Receiver. See the package doc.
type Transport struct {
	cfg    Config
	pid    *actor.PID
	closed chan struct{}
	wg     sync.WaitGroup

	receiver atomic.Pointer[replication.Receiver]
	streamID atomic.Uint64

	mu       sync.Mutex
	outboxes map[uint64]*outbox
	lines    map[uint64]*delayLine // inbound delays, per source replica
	outbound map[uint64]*outStream
	inbound  map[streamKey]*inStream
	isClosed bool

	batches, messages, dropped, faulted, received atomic.Uint64

	// beforeFlush, when set by a test, runs in an outbox's goroutine before it takes the
	// messages waiting.
	beforeFlush func(to uint64)
}

// New validates cfg and spawns the silo's replication actor, named ActorName. Until
// SetReceiver, what arrives is dropped (snapshots are refused).
func New(cfg Config) (*Transport, error) {
	switch {
	case cfg.Self == 0:
		return nil, orrery.Invalid("Self", "is required (this silo's replica id)")
	case cfg.System == nil:
		return nil, orrery.Invalid("System", "is required")
	case cfg.Addresses == nil:
		return nil, orrery.Invalid("Addresses", "is required")
	case cfg.OutboxMessages < 0:
		return nil, orrery.Invalid("OutboxMessages", "must not be negative, got %d", cfg.OutboxMessages)
	case cfg.SnapshotWindow < 0:
		return nil, orrery.Invalid("SnapshotWindow", "must not be negative, got %d", cfg.SnapshotWindow)
	case cfg.StallTimeout < 0:
		return nil, orrery.Invalid("StallTimeout", "must not be negative, got %v", cfg.StallTimeout)
	}
	if cfg.OutboxMessages == 0 {
		cfg.OutboxMessages = DefaultOutboxMessages
	}
	if cfg.SnapshotWindow == 0 {
		cfg.SnapshotWindow = DefaultSnapshotWindow
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	t := &Transport{
		cfg: cfg, closed: make(chan struct{}),
		outboxes: map[uint64]*outbox{}, lines: map[uint64]*delayLine{},
		outbound: map[uint64]*outStream{}, inbound: map[streamKey]*inStream{},
	}
	t.streamID.Store(rand.Uint64() >> 1) // a restarted silo does not reuse its stream ids
	pid, err := cfg.System.Root.SpawnNamed(actor.PropsFromFunc(t.receive), ActorName)
	if err != nil {
		return nil, orrery.Wrap(orrery.CodeInternal, err, "spawn the replication actor %q", ActorName)
	}
	t.pid = pid
	return t, nil
}

// SetReceiver attaches the Receiver (the silo's Driver) that what arrives is handed to.
func (t *Transport) SetReceiver(r replication.Receiver) { t.receiver.Store(&r) }

func (t *Transport) currentReceiver() replication.Receiver {
	if r := t.receiver.Load(); r != nil {
		return *r
	}
	return nil
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	return Stats{
		Batches: t.batches.Load(), Messages: t.messages.Load(), Dropped: t.dropped.Load(),
		Faulted: t.faulted.Load(), Received: t.received.Load(),
	}
}

// Close stops the replication actor and the outboxes, fails the snapshot streams in flight
// (ErrClosed) and waits for the transport's goroutines. Sends after it are dropped.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.isClosed {
		t.mu.Unlock()
		return nil
	}
	t.isClosed = true
	close(t.closed)
	t.mu.Unlock()
	_ = t.cfg.System.Root.StopFuture(t.pid).Wait()
	t.wg.Wait()
	return nil
}

// Send implements replication.Transport: it encodes msgs and queues them in to's outbox,
// whose goroutine sends what accumulated as one RaftBatch; it never blocks on the network.
func (t *Transport) Send(to uint64, msgs []replication.Message) {
	encoded := make([]*orreryv1.RaftGroupMessage, 0, len(msgs))
	for _, m := range msgs {
		data, err := proto.Marshal(m.Raft)
		if err != nil {
			t.dropped.Add(1)
			continue
		}
		encoded = append(encoded, &orreryv1.RaftGroupMessage{Group: uint32(m.Group), Raft: data})
	}
	ob := t.outbox(to)
	if ob == nil {
		t.dropped.Add(uint64(len(encoded)))
		return
	}
	ob.pushMessages(encoded)
}

// SendChecksum sends this replica's checksum of group's state at the CheckConsistency entry
// index to replica to (the group's leader), behind the Raft messages queued there; like them
// it may be lost (the leader then names this replica missing).
func (t *Transport) SendChecksum(to uint64, group int, index uint64, checksum []byte) {
	t.post(to, nil, &orreryv1.ChecksumReport{From: t.cfg.Self, To: to, Group: uint32(group), Index: index, Checksum: checksum})
}

// SendRepairRequest asks replica to's silo to rebuild replica's state of group from its own
// (a rebuild stream); like a checksum report it may be lost.
func (t *Transport) SendRepairRequest(to uint64, group int, replica uint64) {
	t.post(to, nil, &orreryv1.RepairRequest{From: t.cfg.Self, To: to, Group: uint32(group), Replica: replica})
}

// SendClockProbe sends probe number probe, carrying this silo's wall time sentWall, to replica
// to's silo, behind the Raft messages queued there; like them it may be lost, and so may the
// ClockReading that answers it.
func (t *Transport) SendClockProbe(to, probe uint64, sentWall time.Time) {
	t.post(to, nil, &orreryv1.ClockProbe{From: t.cfg.Self, To: to, Probe: probe, SentUnixMicros: sentWall.UnixMicro()})
}

// answerClockProbe answers a ClockProbe with Config.OnClockProbe's reading.
func (t *Transport) answerClockProbe(m *orreryv1.ClockProbe) {
	wall, fitness := t.cfg.OnClockProbe(m.GetFrom())
	t.post(m.GetFrom(), nil, &orreryv1.ClockReading{From: t.cfg.Self, To: m.GetFrom(), Probe: m.GetProbe(),
		WallUnixMicros: wall.UnixMicro(), Fitness: fitness})
}

// post queues a snapshot stream message for replica to (sent to target, or to Addresses(to)
// when target is nil), behind what is already queued there; it reports false once closed.
func (t *Transport) post(to uint64, target *actor.PID, m proto.Message) bool {
	ob := t.outbox(to)
	if ob == nil {
		return false
	}
	ob.pushStream(target, m)
	return true
}

// receive is the replication actor.
func (t *Transport) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *orreryv1.RaftBatch:
		if m.GetTo() == t.cfg.Self {
			t.arrive(m.GetFrom(), len(m.GetMessages()), func() { t.deliver(m) })
		}
	case *orreryv1.RaftRemoved:
		if m.GetTo() == t.cfg.Self && t.cfg.OnRemoved != nil {
			t.arrive(m.GetFrom(), 1, func() { t.removed(m) })
		}
	case *orreryv1.ChecksumReport:
		if m.GetTo() == t.cfg.Self && t.cfg.OnChecksum != nil {
			t.arrive(m.GetFrom(), 1, func() { t.cfg.OnChecksum(m.GetFrom(), int(m.GetGroup()), m.GetIndex(), m.GetChecksum()) })
		}
	case *orreryv1.RepairRequest:
		if m.GetTo() == t.cfg.Self && t.cfg.OnRepairRequest != nil {
			t.arrive(m.GetFrom(), 1, func() { t.cfg.OnRepairRequest(m.GetFrom(), int(m.GetGroup()), m.GetReplica()) })
		}
	case *orreryv1.ClockProbe:
		if m.GetTo() == t.cfg.Self && t.cfg.OnClockProbe != nil {
			t.arrive(m.GetFrom(), 1, func() { t.answerClockProbe(m) })
		}
	case *orreryv1.ClockReading:
		if m.GetTo() == t.cfg.Self && t.cfg.OnClockReading != nil {
			t.arrive(m.GetFrom(), 1, func() {
				t.cfg.OnClockReading(m.GetFrom(), m.GetProbe(), time.UnixMicro(m.GetWallUnixMicros()), m.GetFitness())
			})
		}
	case *orreryv1.SnapshotOpen:
		if m.GetTo() == t.cfg.Self {
			t.arrive(m.GetFrom(), 1, func() { t.open(m) })
		}
	case *orreryv1.SnapshotChunk:
		t.arrive(m.GetFrom(), 1, func() { t.chunk(m) })
	case *orreryv1.SnapshotEnd:
		t.arrive(m.GetFrom(), 1, func() { t.end(m) })
	case *orreryv1.SnapshotReply:
		t.arrive(m.GetFrom(), 1, func() { t.reply(m) })
	}
}

// arrive runs handle for a remote message from replica from (carrying count Raft or stream
// messages) under the faults: not at all when a cut separates them, after the delay when
// there is one, and always in arrival order.
func (t *Transport) arrive(from uint64, count int, handle func()) {
	cut, delay := t.cfg.Faults.between(t.cfg.Self, from)
	if cut {
		t.faulted.Add(uint64(count))
		return
	}
	t.mu.Lock()
	line := t.lines[from]
	if line == nil && delay > 0 && !t.isClosed {
		line = newDelayLine(t.closed, &t.wg)
		t.lines[from] = line
	}
	t.mu.Unlock()
	if line == nil {
		handle()
		return
	}
	line.push(time.Now().Add(delay), handle)
}

// deliver hands a batch to the Receiver.
func (t *Transport) deliver(b *orreryv1.RaftBatch) {
	r := t.currentReceiver()
	if r == nil {
		return
	}
	msgs := make([]replication.Message, 0, len(b.GetMessages()))
	var uncounted []uint32
	for _, m := range b.GetMessages() {
		raft := &raftpb.Message{}
		if proto.Unmarshal(m.GetRaft(), raft) != nil {
			continue
		}
		if t.uncounted(int(m.GetGroup()), raft) && !slices.Contains(uncounted, m.GetGroup()) {
			uncounted = append(uncounted, m.GetGroup())
		}
		msgs = append(msgs, replication.Message{Group: int(m.GetGroup()), Raft: raft})
	}
	t.received.Add(uint64(len(msgs)))
	r.Receive(msgs)
	if len(uncounted) > 0 {
		t.post(b.GetFrom(), nil, &orreryv1.RaftRemoved{From: t.cfg.Self, To: b.GetFrom(), Groups: uncounted})
	}
}

// uncounted reports whether m asks for a vote in group from a replica the group's
// configuration here (Config.Counts) no longer counts: a replica removed from the group that
// never applied its own removal, and so campaigns with an outdated configuration.
func (t *Transport) uncounted(group int, m *raftpb.Message) bool {
	if t.cfg.Counts == nil || (m.GetType() != raftpb.MsgPreVote && m.GetType() != raftpb.MsgVote) {
		return false
	}
	return !t.cfg.Counts(group, m.GetFrom())
}

// removed hands a RaftRemoved to Config.OnRemoved.
func (t *Transport) removed(m *orreryv1.RaftRemoved) {
	groups := make([]int, len(m.GetGroups()))
	for i, g := range m.GetGroups() {
		groups[i] = int(g)
	}
	t.cfg.OnRemoved(m.GetFrom(), groups)
}

// unavailable wraps a stream failure.
func unavailable(cause error, format string, args ...any) error {
	return orrery.Wrap(orrery.CodeUnavailable, cause, format, args...)
}
