package replication

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Transport carries Raft messages and state snapshots to other replicas. Neither method may
// block on the network. Send's delivery is at most once and unordered (Raft re-sends what is
// lost); the receiving side hands each message to its Driver's Receive. SendSnapshot streams a
// snapshot: its chunks, read from snap.Chunks (then closed), and its MsgSnap; the receiving
// side hands them to its Driver's ReceiveSnapshot as one InboundSnapshot, whose Done carries
// the receiver's verdict back. The transport calls snap.Done exactly once: nil when the
// receiver installed the snapshot, an error when it refused it or the stream failed (a lost
// chunk, a broken connection, a receiver that restarted, a deadline).
type Transport interface {
	Send(to uint64, msgs []Message)
	SendSnapshot(to uint64, snap OutboundSnapshot)
}

// OutboundSnapshot is a state snapshot on its way to a follower.
type OutboundSnapshot struct {
	Group int
	// Raft is the MsgSnap: metadata at the state's applied index, no state.
	Raft   *raftpb.Message
	Chunks SnapshotReader
	// Rebuild marks a rebuild of a divergent replica's state (RebuildMessage; the package
	// doc, "Rebuilds") rather than a snapshot Raft asked for.
	Rebuild bool
	// Done receives the outcome, once.
	Done func(err error)
}

// InboundSnapshot is a state snapshot a transport delivered: its MsgSnap, and its chunks as
// they arrive. Done is called once, with nil when the state was installed.
type InboundSnapshot struct {
	Group  int
	Raft   *raftpb.Message
	Chunks Chunks
	// Rebuild is the sender's OutboundSnapshot.Rebuild.
	Rebuild bool
	Done    func(err error)
}

// Receiver is what a Network delivers to: a replica's Driver.
type Receiver interface {
	Receive(msgs []Message)
	ReceiveSnapshot(in InboundSnapshot)
	ReportSnapshot(group int, to uint64, err error)
}

// Errors a Network fails a snapshot stream with.
var (
	// ErrChunkLost: a chunk of the stream was lost, or arrived after the stream's end.
	ErrChunkLost = errors.New("snapshot chunk lost")
	// ErrStreamBroken: the stream's end was lost, a cut separated its ends, or its receiver
	// was down or restarted.
	ErrStreamBroken = errors.New("snapshot stream broken")
)

// NetworkFaults are the misbehaviours Network applies to every message it carries.
type NetworkFaults struct {
	// DropPercent is the chance, in percent, that a message is lost.
	DropPercent int
	// DuplicatePercent is the chance, in percent, that a message is delivered twice.
	DuplicatePercent int
	// MaxDelaySteps delays each message (each copy) by a uniform number of Deliver calls in
	// [0, MaxDelaySteps]; messages with different delays arrive out of order.
	MaxDelaySteps int
	// Reorder shuffles the messages one Deliver call hands each replica.
	Reorder bool
}

// Network is an in-memory Transport twin connecting several replicas in one process. It moves
// only when the test calls Deliver, draws every fault from a generator seeded by the test, and
// copies each message and chunk through its wire encoding, so replicas share no memory.
// Isolate cuts a replica off from every other (messages to or from it, in flight or new, are
// dropped). A snapshot travels as one envelope per chunk and a last one with its MsgSnap, each
// under the faults: the receiver gets it when the last arrives, its chunks put back in order
// and duplicates dropped; a chunk lost or still delayed then fails the stream at that chunk
// (ErrChunkLost), and a lost last envelope fails it at once (ErrStreamBroken). The stream's
// outcome reaches the sender on a later Deliver, whatever the faults, as a real stream's
// status would: through its receiver's ReportSnapshot, or for a rebuild through the
// OutboundSnapshot's Done. It is safe for concurrent use.
type Network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	faults   NetworkFaults
	step     uint64
	seq      uint64
	queue    []envelope
	isolated map[uint64]bool
	streams  map[uint64]*stream
	streamID uint64
}

// envelopeKind is what an envelope carries.
type envelopeKind int

const (
	kindMessage envelopeKind = iota
	kindChunk                // one chunk of a snapshot stream
	kindHeader               // a snapshot stream's MsgSnap, last
	kindStatus               // a stream's outcome, back to its sender (to)
)

// envelope is a message, chunk or stream status in flight.
type envelope struct {
	kind     envelopeKind
	from, to uint64
	group    int
	data     []byte
	due      uint64 // the Deliver step at or after which it arrives
	seq      uint64
	stream   uint64
	chunk    int
}

// stream is a snapshot stream between two replicas.
type stream struct {
	from, to  uint64
	group     int
	chunks    [][]byte
	arrived   []bool
	rebuild   bool
	delivered bool // the receiver got it
	finished  bool // its outcome is decided
	err       error
	done      func(error)
}

// NewNetwork returns a network without faults whose random choices follow seed.
func NewNetwork(seed uint64) *Network {
	return &Network{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		isolated: map[uint64]bool{},
		streams:  map[uint64]*stream{},
	}
}

// SetFaults sets the faults applied to messages sent from now on.
func (n *Network) SetFaults(f NetworkFaults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = f
}

// Isolate cuts replica id off from every other replica until Rejoin.
func (n *Network) Isolate(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[id] = true
}

// Rejoin reconnects a replica Isolate cut off.
func (n *Network) Rejoin(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.isolated, id)
}

// Transport returns the Transport replica from sends through.
func (n *Network) Transport(from uint64) Transport { return endpoint{net: n, from: from} }

// endpoint is one replica's side of a Network.
type endpoint struct {
	net  *Network
	from uint64
}

// Send implements Transport.
func (e endpoint) Send(to uint64, msgs []Message) {
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		data, err := proto.Marshal(m.Raft)
		if err != nil {
			panic(fmt.Sprintf("replication.Network: encode raft message: %v", err))
		}
		n.post(envelope{kind: kindMessage, from: e.from, to: to, group: m.Group, data: data})
	}
}

// SendSnapshot implements Transport. It reads the whole snapshot at once: the read is
// consistent, so reading it now or as the chunks go is the same.
func (e endpoint) SendSnapshot(to uint64, snap OutboundSnapshot) {
	n := e.net
	var chunks [][]byte
	var readErr error
	for {
		chunk, err := snap.Chunks.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		chunks = append(chunks, bytes.Clone(chunk))
	}
	_ = snap.Chunks.Close()
	header, err := proto.Marshal(snap.Raft)
	if err != nil {
		panic(fmt.Sprintf("replication.Network: encode raft message: %v", err))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.streamID++
	id := n.streamID
	st := &stream{from: e.from, to: to, group: snap.Group, rebuild: snap.Rebuild, chunks: make([][]byte, len(chunks)), arrived: make([]bool, len(chunks)), done: snap.Done}
	n.streams[id] = st
	if readErr != nil {
		n.finish(id, readErr)
		return
	}
	for i, chunk := range chunks {
		n.post(envelope{kind: kindChunk, from: e.from, to: to, group: snap.Group, data: chunk, stream: id, chunk: i})
	}
	if !n.post(envelope{kind: kindHeader, from: e.from, to: to, group: snap.Group, data: header, stream: id}) {
		n.finish(id, ErrStreamBroken)
	}
}

// post queues env under the faults and reports whether a copy of it is in flight; the caller
// holds mu.
func (n *Network) post(env envelope) bool {
	if n.cut(env.from, env.to) || n.chance(n.faults.DropPercent) {
		return false
	}
	copies := 1
	if n.chance(n.faults.DuplicatePercent) {
		copies = 2
	}
	for range copies {
		n.seq++
		delay := uint64(0)
		if n.faults.MaxDelaySteps > 0 {
			delay = uint64(n.rng.IntN(n.faults.MaxDelaySteps + 1))
		}
		env.due, env.seq = n.step+delay, n.seq
		n.queue = append(n.queue, env)
	}
	return true
}

// finish decides stream id's outcome and queues it for its sender, once; the caller holds mu.
func (n *Network) finish(id uint64, err error) {
	st := n.streams[id]
	if st == nil || st.finished {
		return
	}
	st.finished, st.err = true, err
	n.seq++
	n.queue = append(n.queue, envelope{kind: kindStatus, from: st.to, to: st.from, group: st.group, due: n.step, seq: n.seq, stream: id})
}

// Restarted fails every stream replica id was receiving and had not settled: a restarted
// receiver never answers them.
func (n *Network) Restarted(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, sid := range slices.Sorted(maps.Keys(n.streams)) {
		if st := n.streams[sid]; st.to == id && st.delivered {
			n.finish(sid, ErrStreamBroken)
		}
	}
}

// Deliver moves the network one step: every message due by now goes to its destination's
// Receiver, one Receive call per destination in ascending id order, each batch in sending
// order unless NetworkFaults.Reorder shuffles it; then the snapshot streams whose last envelope
// arrived (ReceiveSnapshot), then the streams' outcomes (ReportSnapshot, to the sender).
// receiver returns nil for a replica that is down: what is due to it is dropped, a stream to
// it fails, and an outcome for it waits until it is up. Messages a cut separates are dropped.
// It returns how many messages, streams and outcomes it delivered. The receivers run without
// the network's lock held, so they may send.
func (n *Network) Deliver(receiver func(to uint64) Receiver) int {
	n.mu.Lock()
	var due []envelope
	var broken []uint64
	kept := n.queue[:0]
	for _, env := range n.queue {
		switch {
		case env.kind == kindStatus:
			if env.due <= n.step && receiver(env.to) != nil {
				due = append(due, env)
			} else {
				kept = append(kept, env)
			}
		case n.cut(env.from, env.to):
			if env.kind == kindHeader {
				broken = append(broken, env.stream)
			}
		case env.due <= n.step:
			due = append(due, env)
		default:
			kept = append(kept, env)
		}
	}
	clear(n.queue[len(kept):])
	n.queue = kept
	for _, id := range broken {
		n.finish(id, ErrStreamBroken)
	}
	n.step++
	slices.SortStableFunc(due, func(a, b envelope) int {
		return cmp.Or(cmp.Compare(a.to, b.to), cmp.Compare(a.seq, b.seq))
	})
	var batches []Outbound
	var snaps []struct {
		to uint64
		in InboundSnapshot
	}
	var statuses []envelope
	for _, env := range due {
		switch env.kind {
		case kindChunk:
			if st := n.streams[env.stream]; st != nil && !st.delivered {
				st.chunks[env.chunk], st.arrived[env.chunk] = env.data, true
			}
			continue
		case kindHeader:
			st := n.streams[env.stream]
			if st == nil || st.delivered || st.finished {
				continue
			}
			if receiver(env.to) == nil {
				n.finish(env.stream, ErrStreamBroken)
				continue
			}
			st.delivered = true
			id := env.stream
			snaps = append(snaps, struct {
				to uint64
				in InboundSnapshot
			}{env.to, InboundSnapshot{
				Group:   env.group,
				Raft:    decodeMessage(env.data),
				Chunks:  &streamChunks{chunks: st.chunks, arrived: st.arrived},
				Rebuild: st.rebuild,
				Done:    func(err error) { n.settle(id, err) },
			}})
			continue
		case kindStatus:
			statuses = append(statuses, env)
			continue
		}
		if len(batches) == 0 || batches[len(batches)-1].To != env.to {
			batches = append(batches, Outbound{To: env.to})
		}
		b := &batches[len(batches)-1]
		b.Messages = append(b.Messages, Message{Group: env.group, Raft: decodeMessage(env.data)})
	}
	if n.faults.Reorder {
		for _, b := range batches {
			n.rng.Shuffle(len(b.Messages), func(i, j int) { b.Messages[i], b.Messages[j] = b.Messages[j], b.Messages[i] })
		}
	}
	reports := make([]func(), 0, len(statuses))
	for _, env := range statuses {
		st := n.streams[env.stream]
		delete(n.streams, env.stream)
		r, from, err := receiver(env.to), env.from, st.err
		if st.rebuild { // no Raft sent it: its sender hears through Done
			done := st.done
			reports = append(reports, func() { done(err) })
			continue
		}
		reports = append(reports, func() { r.ReportSnapshot(env.group, from, err) })
	}
	n.mu.Unlock()
	delivered := 0
	for _, b := range batches {
		if r := receiver(b.To); r != nil {
			r.Receive(b.Messages)
		}
		delivered += len(b.Messages)
	}
	for _, s := range snaps {
		if r := receiver(s.to); r != nil {
			r.ReceiveSnapshot(s.in)
		}
	}
	for _, report := range reports {
		report()
	}
	return delivered + len(snaps) + len(reports)
}

// settle is an inbound snapshot's Done: the receiver's verdict.
func (n *Network) settle(id uint64, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.finish(id, err)
}

func decodeMessage(data []byte) *raftpb.Message {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(data, m); err != nil {
		panic(fmt.Sprintf("replication.Network: decode raft message: %v", err))
	}
	return m
}

// streamChunks is a delivered stream's chunks, in order, failing at the first one missing.
type streamChunks struct {
	chunks  [][]byte
	arrived []bool
	next    int
}

func (c *streamChunks) Next() ([]byte, error) {
	if c.next == len(c.chunks) {
		return nil, io.EOF
	}
	if !c.arrived[c.next] {
		return nil, fmt.Errorf("%w: chunk %d of %d", ErrChunkLost, c.next, len(c.chunks))
	}
	c.next++
	return c.chunks[c.next-1], nil
}

// InFlight reports how many messages wait for a later Deliver.
func (n *Network) InFlight() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue)
}

// cut reports whether an isolation separates from and to; the caller holds mu.
func (n *Network) cut(from, to uint64) bool { return n.isolated[from] || n.isolated[to] }

// chance draws true with the given percent probability; the caller holds mu.
func (n *Network) chance(percent int) bool { return percent > 0 && n.rng.IntN(100) < percent }
