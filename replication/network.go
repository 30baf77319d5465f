package replication

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Transport carries Raft messages to other replicas. Send must not block on the network;
// delivery is at most once and unordered (Raft re-sends what is lost). The receiving side hands
// each message to its engine's Step.
type Transport interface {
	Send(to uint64, msgs []Message)
}

// Faults are the misbehaviours Network applies to every message it carries.
type Faults struct {
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
// copies each message through its wire encoding, so replicas share no memory. Isolate cuts a
// replica off from every other (messages to or from it, in flight or new, are dropped). It is
// safe for concurrent use.
type Network struct {
	mu       sync.Mutex
	rng      *rand.Rand
	faults   Faults
	step     uint64
	seq      uint64
	queue    []envelope
	isolated map[uint64]bool
}

// envelope is a message in flight.
type envelope struct {
	from, to uint64
	group    int
	data     []byte
	due      uint64 // the Deliver step at or after which it arrives
	seq      uint64
}

// NewNetwork returns a network without faults whose random choices follow seed.
func NewNetwork(seed uint64) *Network {
	return &Network{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), isolated: map[uint64]bool{}}
}

// SetFaults sets the faults applied to messages sent from now on.
func (n *Network) SetFaults(f Faults) {
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
		if n.cut(e.from, to) || n.chance(n.faults.DropPercent) {
			continue
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
			n.queue = append(n.queue, envelope{from: e.from, to: to, group: m.Group, data: data, due: n.step + delay, seq: n.seq})
		}
	}
}

// Deliver moves the network one step: every message due by now goes to deliver, one call per
// destination replica in ascending id order, each batch in sending order unless Faults.Reorder
// shuffles it. Messages a cut separates are dropped. It returns how many messages it delivered.
// deliver runs without the network's lock held, so it may send.
func (n *Network) Deliver(deliver func(to uint64, msgs []Message)) int {
	n.mu.Lock()
	var due []envelope
	kept := n.queue[:0]
	for _, env := range n.queue {
		switch {
		case n.cut(env.from, env.to):
		case env.due <= n.step:
			due = append(due, env)
		default:
			kept = append(kept, env)
		}
	}
	clear(n.queue[len(kept):])
	n.queue = kept
	n.step++
	slices.SortStableFunc(due, func(a, b envelope) int {
		return cmp.Or(cmp.Compare(a.to, b.to), cmp.Compare(a.seq, b.seq))
	})
	var batches []Outbound
	for _, env := range due {
		m := &raftpb.Message{}
		if err := proto.Unmarshal(env.data, m); err != nil {
			panic(fmt.Sprintf("replication.Network: decode raft message: %v", err))
		}
		if len(batches) == 0 || batches[len(batches)-1].To != env.to {
			batches = append(batches, Outbound{To: env.to})
		}
		b := &batches[len(batches)-1]
		b.Messages = append(b.Messages, Message{Group: env.group, Raft: m})
	}
	if n.faults.Reorder {
		for _, b := range batches {
			n.rng.Shuffle(len(b.Messages), func(i, j int) { b.Messages[i], b.Messages[j] = b.Messages[j], b.Messages[i] })
		}
	}
	n.mu.Unlock()
	for _, b := range batches {
		deliver(b.To, b.Messages)
	}
	return len(due)
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
