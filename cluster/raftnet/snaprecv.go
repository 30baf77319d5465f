package raftnet

import (
	"io"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/replication"
)

// streamKey names an inbound stream: its sender and the sender's stream id.
type streamKey struct{ from, stream uint64 }

// inStream is an inbound snapshot stream: the chunks that arrived and are not consumed yet,
// and, as the InboundSnapshot's Chunks, their reader.
type inStream struct {
	t       *Transport
	key     streamKey
	replyTo *actor.PID
	notify  chan struct{}

	mu      sync.Mutex
	chunks  map[uint64][]byte
	next    uint64 // the chunk Next returns next
	ended   bool
	count   uint64 // the stream's chunk count, once ended
	err     error  // what broke the stream
	settled bool
}

// open starts an inbound stream and hands it to the Receiver.
func (t *Transport) open(m *orreryv1.SnapshotOpen) {
	key := streamKey{from: m.GetFrom(), stream: m.GetStream()}
	replyTo := actor.NewPID(m.GetReplyAddress(), m.GetReplyId())
	refuse := func(err error) {
		t.post(key.from, replyTo, &orreryv1.SnapshotReply{Stream: key.stream, From: t.cfg.Self, Settled: true, Error: orrery.AsError(err).Proto()})
	}
	r := t.currentReceiver()
	if r == nil {
		refuse(unavailable(ErrNoReceiver, "replica %d", t.cfg.Self))
		return
	}
	raft := &raftpb.Message{}
	if err := proto.Unmarshal(m.GetRaft(), raft); err != nil {
		refuse(orrery.Wrap(orrery.CodeInternal, err, "decode the MsgSnap"))
		return
	}
	in := &inStream{t: t, key: key, replyTo: replyTo, notify: make(chan struct{}, 1), chunks: map[uint64][]byte{}}
	t.mu.Lock()
	old := t.inbound[key]
	t.inbound[key] = in
	t.mu.Unlock()
	if old != nil {
		old.fail(unavailable(ErrAborted, "stream %d from replica %d opened again", key.stream, key.from))
	}
	r.ReceiveSnapshot(replication.InboundSnapshot{Group: int(m.GetGroup()), Raft: raft, Chunks: in, Rebuild: m.GetRebuild(), Done: in.done})
}

// lookup returns the inbound stream key names; for a stream it does not know it tells the
// sender, whose stream then fails (this side restarted, or settled it already).
func (t *Transport) lookup(key streamKey) *inStream {
	t.mu.Lock()
	in := t.inbound[key]
	t.mu.Unlock()
	if in == nil {
		t.post(key.from, nil, &orreryv1.SnapshotReply{Stream: key.stream, From: t.cfg.Self, Settled: true,
			Error: orrery.Wrap(orrery.CodeUnavailable, ErrAborted, "replica %d has no stream %d from replica %d", t.cfg.Self, key.stream, key.from).Proto()})
	}
	return in
}

func (t *Transport) chunk(m *orreryv1.SnapshotChunk) {
	if in := t.lookup(streamKey{from: m.GetFrom(), stream: m.GetStream()}); in != nil {
		in.mu.Lock()
		if !in.settled && m.GetSeq() >= in.next {
			in.chunks[m.GetSeq()] = m.GetData()
		}
		in.mu.Unlock()
		in.wake()
	}
}

func (t *Transport) end(m *orreryv1.SnapshotEnd) {
	key := streamKey{from: m.GetFrom(), stream: m.GetStream()}
	if m.GetAborted() != "" {
		t.mu.Lock()
		in := t.inbound[key]
		t.mu.Unlock()
		if in != nil {
			in.fail(unavailable(ErrAborted, "replica %d: %s", key.from, m.GetAborted()))
		}
		return
	}
	if in := t.lookup(key); in != nil {
		in.mu.Lock()
		in.ended, in.count = true, m.GetChunkCount()
		in.mu.Unlock()
		in.wake()
	}
}

func (in *inStream) wake() {
	select {
	case in.notify <- struct{}{}:
	default:
	}
}

// fail breaks the stream: Next returns err from now on.
func (in *inStream) fail(err error) {
	in.mu.Lock()
	if in.err == nil {
		in.err = err
	}
	in.mu.Unlock()
	in.wake()
}

// Next implements replication.Chunks: the next chunk in order, once it has arrived; io.EOF
// after the last; an error when the stream broke or nothing arrived within the stall timeout.
// Each chunk it returns is acknowledged to the sender, which then may send one more.
func (in *inStream) Next() ([]byte, error) {
	t := in.t
	for {
		in.mu.Lock()
		if in.err != nil {
			err := in.err
			in.mu.Unlock()
			return nil, err
		}
		if data, ok := in.chunks[in.next]; ok {
			delete(in.chunks, in.next)
			in.next++
			consumed := in.next
			in.mu.Unlock()
			t.post(in.key.from, in.replyTo, &orreryv1.SnapshotReply{Stream: in.key.stream, From: t.cfg.Self, Consumed: consumed})
			return data, nil
		}
		if in.ended && in.next >= in.count {
			in.mu.Unlock()
			return nil, io.EOF
		}
		in.mu.Unlock()
		timer := time.NewTimer(t.cfg.StallTimeout)
		select {
		case <-in.notify:
			timer.Stop()
		case <-timer.C:
			in.fail(unavailable(ErrStalled, "stream %d from replica %d: no chunk in %v", in.key.stream, in.key.from, t.cfg.StallTimeout))
		case <-t.closed:
			timer.Stop()
			in.fail(unavailable(ErrClosed, "stream %d from replica %d", in.key.stream, in.key.from))
		}
	}
}

// done is the InboundSnapshot's Done: it sends the verdict to the sender, once.
func (in *inStream) done(err error) {
	t := in.t
	in.mu.Lock()
	if in.settled {
		in.mu.Unlock()
		return
	}
	in.settled = true
	consumed := in.next
	in.chunks = nil
	in.mu.Unlock()
	t.mu.Lock()
	if t.inbound[in.key] == in {
		delete(t.inbound, in.key)
	}
	t.mu.Unlock()
	reply := &orreryv1.SnapshotReply{Stream: in.key.stream, From: t.cfg.Self, Consumed: consumed, Settled: true}
	if err != nil {
		reply.Error = orrery.AsError(err).Proto()
	}
	t.post(in.key.from, in.replyTo, reply)
}
