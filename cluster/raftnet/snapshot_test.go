package raftnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery/replication"
)

// chunkData is chunk seq of a test snapshot: size bytes, its seq in the first eight.
func chunkData(seq, size int) []byte {
	b := bytes.Repeat([]byte{byte(seq)}, size)
	binary.BigEndian.PutUint64(b, uint64(seq))
	return b
}

// chunkReader is a test SnapshotReader of count chunks of size bytes; it reuses its buffer,
// as a real reader may. onNext, when set, runs at each read with the number read so far.
type chunkReader struct {
	count, size int
	onNext      func(reads int)

	mu     sync.Mutex
	reads  int
	closed bool
	buf    []byte
}

func (r *chunkReader) Next() ([]byte, error) {
	r.mu.Lock()
	if r.reads == r.count {
		r.mu.Unlock()
		return nil, io.EOF
	}
	r.reads++
	n := r.reads
	r.buf = append(r.buf[:0], chunkData(n-1, r.size)...)
	r.mu.Unlock()
	if r.onNext != nil {
		r.onNext(n)
	}
	return r.buf, nil
}

func (r *chunkReader) AppliedIndex() uint64 { return 42 }

func (r *chunkReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *chunkReader) state() (reads int, closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads, r.closed
}

// msgSnap is a MsgSnap of group 5 at index 42.
func msgSnap() *raftpb.Message {
	return &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: proto.Uint64(1), To: proto.Uint64(2), Term: proto.Uint64(3),
		Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(42), Term: proto.Uint64(3)}}}
}

// outbound is an OutboundSnapshot of reader whose Done reports to o, recording whether the
// reader was closed by then.
func outbound(reader *chunkReader, o *outcome, closedAtDone *atomic.Bool) replication.OutboundSnapshot {
	return replication.OutboundSnapshot{Group: 5, Raft: msgSnap(), Chunks: reader, Done: func(err error) {
		_, closed := reader.state()
		closedAtDone.Store(closed)
		o.report(err)
	}}
}

// A snapshot of several MiB arrives whole and in order, never more than the window of chunks
// ahead of what the receiver consumed; the sender's Done(nil) follows the receiver's Done(nil),
// once, with the reader closed.
func TestIntegrationSnapshotStreamsInOrderWithinTheWindow(t *testing.T) {
	const window, chunks, size = 3, 12, replication.MaxSnapshotChunkBytes
	n := newNet(t)
	a, b := n.start(1, Config{SnapshotWindow: window}), n.start(2, Config{})
	var consumed atomic.Int64     // Next calls the receiver made
	var receiverDone atomic.Int64 // unix nanos of the receiver's Done
	got := make(chan error, 1)
	rec := &recorder{onSnapshot: func(in replication.InboundSnapshot) {
		err := func() error {
			if in.Group != 5 || in.Raft.GetSnapshot().GetMetadata().GetIndex() != 42 || in.Raft.GetType() != raftpb.MsgSnap {
				return fmt.Errorf("arrived as group %d, %v", in.Group, in.Raft)
			}
			for seq := 0; ; seq++ {
				// Counted before Next: Next acknowledges a chunk before it returns it.
				consumed.Add(1)
				chunk, err := in.Chunks.Next()
				if err == io.EOF {
					if seq != chunks {
						return fmt.Errorf("EOF after %d chunks, want %d", seq, chunks)
					}
					return nil
				}
				if err != nil {
					return err
				}
				if !bytes.Equal(chunk, chunkData(seq, size)) {
					return fmt.Errorf("chunk %d arrived as chunk %d", seq, binary.BigEndian.Uint64(chunk))
				}
				time.Sleep(5 * time.Millisecond) // a slow install, so the window binds
			}
		}()
		receiverDone.Store(time.Now().UnixNano())
		in.Done(err)
		got <- err
	}}
	b.transport.SetReceiver(rec)
	var overWindow atomic.Int64
	reader := &chunkReader{count: chunks, size: size, onNext: func(reads int) {
		if ahead := int64(reads) - consumed.Load(); ahead > window {
			overWindow.Store(ahead)
		}
	}}
	o := newOutcome()
	var closedAtDone atomic.Bool
	a.transport.SendSnapshot(2, outbound(reader, o, &closedAtDone))
	if err := o.wait(t, 30*time.Second); err != nil {
		t.Fatalf("sender's Done: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("receiver: %v", err)
	}
	if ahead := overWindow.Load(); ahead != 0 {
		t.Fatalf("the sender read a chunk %d ahead of the receiver, beyond the window of %d", ahead, window)
	}
	if o.at.UnixNano() < receiverDone.Load() {
		t.Fatal("the sender's Done came before the receiver's")
	}
	if !closedAtDone.Load() {
		t.Fatal("the reader was not closed when Done was called")
	}
	time.Sleep(100 * time.Millisecond)
	if o.calls != 1 {
		t.Fatalf("Done called %d times", o.calls)
	}
}

// A receiver that refuses the snapshot fails the sender's Done with ErrRefused, and the
// sender stops reading within its window.
func TestIntegrationRefusedSnapshotFailsTheSender(t *testing.T) {
	const window = 2
	n := newNet(t)
	a, b := n.start(1, Config{SnapshotWindow: window}), n.start(2, Config{})
	b.transport.SetReceiver(&recorder{onSnapshot: func(in replication.InboundSnapshot) {
		in.Done(replication.ErrSnapshotRefused)
	}})
	reader := &chunkReader{count: 100, size: 1024}
	o := newOutcome()
	var closedAtDone atomic.Bool
	a.transport.SendSnapshot(2, outbound(reader, o, &closedAtDone))
	err := o.wait(t, 30*time.Second)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("sender's Done: %v, want ErrRefused", err)
	}
	if reads, _ := reader.state(); reads > window {
		t.Fatalf("the sender read %d chunks of a refused snapshot, beyond its window of %d", reads, window)
	}
	if !closedAtDone.Load() {
		t.Fatal("the reader was not closed when Done was called")
	}
}

// A receiver that goes away mid-stream fails the sender's Done within the stall timeout.
func TestIntegrationReceiverGoneFailsTheStream(t *testing.T) {
	const stall = time.Second
	n := newNet(t)
	a, b := n.start(1, Config{SnapshotWindow: 2, StallTimeout: stall}), n.start(2, Config{StallTimeout: stall})
	twoRead := make(chan struct{})
	b.transport.SetReceiver(&recorder{onSnapshot: func(in replication.InboundSnapshot) {
		for range 2 {
			if _, err := in.Chunks.Next(); err != nil {
				t.Errorf("chunk: %v", err)
			}
		}
		close(twoRead)
		// This receiver never settles: its silo goes away.
	}})
	reader := &chunkReader{count: 50, size: 1024}
	o := newOutcome()
	var closedAtDone atomic.Bool
	a.transport.SendSnapshot(2, outbound(reader, o, &closedAtDone))
	select {
	case <-twoRead:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiver never got two chunks")
	}
	gone := time.Now()
	b.stop()
	err := o.wait(t, 30*time.Second)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("sender's Done: %v, want ErrStalled", err)
	}
	if took := o.at.Sub(gone); took > stall+5*time.Second {
		t.Fatalf("the stream failed %v after its receiver went away, stall timeout %v", took, stall)
	}
}

// A sender that goes away mid-stream fails the receiver's Next within the stall timeout, so a
// Driver installing it goes on.
func TestIntegrationSenderGoneFailsTheReceiver(t *testing.T) {
	const stall = time.Second
	n := newNet(t)
	a, b := n.start(1, Config{SnapshotWindow: 2}), n.start(2, Config{StallTimeout: stall})
	installed := make(chan error, 1)
	b.transport.SetReceiver(&recorder{onSnapshot: func(in replication.InboundSnapshot) {
		var err error
		for err == nil {
			_, err = in.Chunks.Next()
		}
		in.Done(err)
		installed <- err
	}})
	stopped, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the silos stop: their Close waits for the stream
	var once sync.Once
	reader := &chunkReader{count: 50, size: 1024, onNext: func(reads int) {
		if reads == 2 {
			once.Do(func() { close(stopped) })
			<-release // this sender hangs until its silo is gone
		}
	}}
	a.transport.SendSnapshot(2, outbound(reader, newOutcome(), &atomic.Bool{}))
	<-stopped
	a.remote.Shutdown(false)
	select {
	case err := <-installed:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("receiver's Next: %v, want ErrStalled", err)
		}
	case <-time.After(stall + 10*time.Second):
		t.Fatal("the receiver's Next never failed")
	}
}

// A stream that a cut separates fails at once on the sending side.
func TestIntegrationCutFailsASnapshot(t *testing.T) {
	n := newNet(t)
	a, _ := n.start(1, Config{}), n.start(2, Config{})
	a.faults.Cut(2)
	o := newOutcome()
	a.transport.SendSnapshot(2, outbound(&chunkReader{count: 3, size: 10}, o, &atomic.Bool{}))
	if err := o.wait(t, 10*time.Second); !errors.Is(err, ErrCut) {
		t.Fatalf("Done: %v, want ErrCut", err)
	}
	o = newOutcome()
	a.transport.SendSnapshot(9, outbound(&chunkReader{count: 3, size: 10}, o, &atomic.Bool{}))
	if err := o.wait(t, 10*time.Second); !errors.Is(err, ErrUnknownReplica) {
		t.Fatalf("Done for an unknown replica: %v, want ErrUnknownReplica", err)
	}
}

// A rebuild stream arrives marked as one (InboundSnapshot.Rebuild) with its header, a
// snapshot Raft asked for arrives unmarked, and a RepairRequest reaches OnRepairRequest.
func TestIntegrationARebuildArrivesMarkedAndARepairRequestArrives(t *testing.T) {
	n := newNet(t)
	type request struct {
		from, replica uint64
		group         int
	}
	requests := make(chan request, 4)
	a := n.start(1, Config{})
	b := n.start(2, Config{OnRepairRequest: func(from uint64, group int, replica uint64) { requests <- request{from, replica, group} }})
	marks := make(chan bool, 2)
	b.transport.SetReceiver(&recorder{onSnapshot: func(in replication.InboundSnapshot) {
		for {
			if _, err := in.Chunks.Next(); err != nil {
				break
			}
		}
		marks <- in.Rebuild
		in.Done(nil)
	}})
	for _, rebuild := range []bool{true, false} {
		o := newOutcome()
		var closedAtDone atomic.Bool
		snap := outbound(&chunkReader{count: 2, size: 16}, o, &closedAtDone)
		snap.Rebuild = rebuild
		a.transport.SendSnapshot(2, snap)
		if err := o.wait(t, 30*time.Second); err != nil {
			t.Fatalf("rebuild %v: sender's Done: %v", rebuild, err)
		}
		if got := <-marks; got != rebuild {
			t.Fatalf("a stream sent with Rebuild %v arrived with %v", rebuild, got)
		}
	}
	a.transport.SendRepairRequest(2, 7, 3)
	select {
	case got := <-requests:
		if got != (request{from: 1, replica: 3, group: 7}) {
			t.Fatalf("repair request %+v, want from 1, group 7, replica 3", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no repair request arrived")
	}
}
