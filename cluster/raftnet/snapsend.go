package raftnet

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/replication"
)

// outStream is the sending side's view of a snapshot stream: what the receiver reported.
type outStream struct {
	to   uint64
	wake chan struct{}

	mu       sync.Mutex
	consumed uint64
	settled  bool
	verdict  error
}

// SendSnapshot implements replication.Transport: a goroutine of the transport streams the
// snapshot (see the package doc), closes snap.Chunks, and calls snap.Done once with the
// outcome. It never blocks on the network.
func (t *Transport) SendSnapshot(to uint64, snap replication.OutboundSnapshot) {
	t.mu.Lock()
	if t.isClosed {
		t.mu.Unlock()
		go func() {
			_ = snap.Chunks.Close()
			snap.Done(unavailable(ErrClosed, "snapshot of group %d to replica %d", snap.Group, to))
		}()
		return
	}
	id := t.streamID.Add(1)
	st := &outStream{to: to, wake: make(chan struct{}, 1)}
	t.outbound[id] = st
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		err := t.stream(to, id, st, snap)
		t.mu.Lock()
		delete(t.outbound, id)
		t.mu.Unlock()
		_ = snap.Chunks.Close()
		snap.Done(err)
	}()
}

// stream sends snap to replica to as stream id: its MsgSnap, then its chunks, at most the
// window beyond those the receiver consumed, then its end; and waits for the verdict.
func (t *Transport) stream(to, id uint64, st *outStream, snap replication.OutboundSnapshot) error {
	what := fmt.Sprintf("snapshot of group %d to replica %d", snap.Group, to)
	if _, ok := t.cfg.Addresses(to); !ok {
		return unavailable(ErrUnknownReplica, "%s", what)
	}
	raft, err := proto.Marshal(snap.Raft)
	if err != nil {
		return orrery.Wrap(orrery.CodeInternal, err, "%s: encode the MsgSnap", what)
	}
	isCut := func() bool { cut, _ := t.cfg.Faults.between(t.cfg.Self, to); return cut }
	if isCut() {
		return unavailable(ErrCut, "%s", what)
	}
	abort := func(cause error) error {
		t.post(to, nil, &orreryv1.SnapshotEnd{Stream: id, From: t.cfg.Self, Aborted: cause.Error()})
		return cause
	}
	t.post(to, nil, &orreryv1.SnapshotOpen{
		Stream: id, From: t.cfg.Self, To: to, Group: uint32(snap.Group), Raft: raft,
		ReplyAddress: t.pid.GetAddress(), ReplyId: t.pid.GetId(), Rebuild: snap.Rebuild,
	})
	window := uint64(t.cfg.SnapshotWindow)
	var sent, consumed uint64
	ended := false
	stall := time.NewTimer(t.cfg.StallTimeout)
	defer stall.Stop()
	for {
		for !ended && sent < consumed+window {
			if isCut() {
				return abort(unavailable(ErrCut, "%s", what))
			}
			chunk, err := snap.Chunks.Next()
			if err == io.EOF {
				t.post(to, nil, &orreryv1.SnapshotEnd{Stream: id, From: t.cfg.Self, ChunkCount: sent})
				ended = true
				break
			}
			if err != nil {
				return abort(err)
			}
			t.post(to, nil, &orreryv1.SnapshotChunk{Stream: id, From: t.cfg.Self, Seq: sent, Data: bytes.Clone(chunk)})
			sent++
		}
		select {
		case <-st.wake:
		case <-stall.C:
			return abort(unavailable(ErrStalled, "%s: no progress in %v (%d chunks sent, %d consumed)", what, t.cfg.StallTimeout, sent, consumed))
		case <-t.closed:
			return abort(unavailable(ErrClosed, "%s", what))
		}
		st.mu.Lock()
		got, settled, verdict := st.consumed, st.settled, st.verdict
		st.mu.Unlock()
		if settled {
			return verdict
		}
		if got > consumed {
			consumed = got
			if !stall.Stop() {
				<-stall.C
			}
			stall.Reset(t.cfg.StallTimeout)
		}
	}
}

// reply records a receiver's SnapshotReply on the stream it names.
func (t *Transport) reply(m *orreryv1.SnapshotReply) {
	t.mu.Lock()
	st := t.outbound[m.GetStream()]
	t.mu.Unlock()
	if st == nil || st.to != m.GetFrom() {
		return
	}
	st.mu.Lock()
	st.consumed = max(st.consumed, m.GetConsumed())
	if m.GetSettled() && !st.settled {
		st.settled = true
		if m.GetError() != nil {
			st.verdict = unavailable(ErrRefused, "replica %d: %v", m.GetFrom(), orrery.FromProto(m.GetError()))
		}
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}
