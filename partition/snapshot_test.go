package partition

import (
	"bytes"
	"slices"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/replication"
)

// TestSnapshotChunkBoundsAgree: persistence bounds its snapshot chunks by the replication
// layer's limit, which it cannot import.
func TestSnapshotChunkBoundsAgree(t *testing.T) {
	if persistence.MaxSnapshotChunkBytes != replication.MaxSnapshotChunkBytes {
		t.Fatalf("persistence.MaxSnapshotChunkBytes %d, replication.MaxSnapshotChunkBytes %d",
			persistence.MaxSnapshotChunkBytes, replication.MaxSnapshotChunkBytes)
	}
}

// TestInstalledSnapshotServesTheSameState: partition 1's snapshot on one host, installed into
// partition 1 of another host (through the replication.StateMachine methods), replaces that
// partition's state: its grain serves the first host's lane messages and replays its
// receipts byte for byte, and wakes a receive parked on its old, empty queue, which leases the
// installed messages in the entry after the installed mark.
func TestInstalledSnapshotServesTheSameState(t *testing.T) {
	t.Parallel()
	a, b := newHarness(t, nil), newHarness(t, nil)
	first := a.do(command("c1", 0, enqueue("m1")))
	receipt(t, first)
	receipt(t, a.do(command("c2", 0, enqueue("m2"))))
	for _, id := range []string{"x1", "x2", "x3", "x4"} { // b's old state, applied further
		receipt(t, b.do(command("b-"+id, 0, enqueue(id))))
	}
	if n := len(receipt(t, b.do(command("b-r", 0, receive(10)))).GetResults()[0].GetReceive().GetMessages()); n != 4 {
		t.Fatalf("b leased %d messages, want 4", n)
	}
	parked := b.send(command("b-wait", 20*time.Second, receive(10)))
	b.waitParked(1)
	from := a.status()
	if before := b.status(); before.GetAppliedIndex() <= from.GetAppliedIndex() {
		t.Fatalf("b applied %d, a %d: b's next entries must follow the installed mark", before.GetAppliedIndex(), from.GetAppliedIndex())
	}

	snap, err := a.cfg.Host.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if snap.AppliedIndex() != from.GetAppliedIndex() {
		t.Fatalf("snapshot at %d, partition applied %d", snap.AppliedIndex(), from.GetAppliedIndex())
	}
	meta := replication.SnapshotMeta{Index: snap.AppliedIndex(), LoggedTimeMicros: from.GetLoggedTimeUnixMicros()}
	if err := b.cfg.Host.Install(1, meta, snap); err != nil {
		t.Fatal(err)
	}

	woke := replyOf(t, parked)
	ids := func(msgs []*orreryv1.QueueMessage) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.GetId())
		}
		return out
	}
	if got := ids(receipt(t, woke).GetResults()[0].GetReceive().GetMessages()); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("the receive parked on b's old state leased %v, want a's messages", got)
	}
	if got, want := ids(b.lane()), ids(a.lane()); !slices.Equal(got, want) || len(want) != 2 {
		t.Fatalf("b's lane %v after the install, a's %v", got, want)
	}
	if st := b.status(); st.GetAppliedIndex() <= meta.Index || st.GetLoggedTimeUnixMicros() <= meta.LoggedTimeMicros {
		t.Fatalf("b's partition at %d, logged time %d; want an entry after the snapshot's %d, %d",
			st.GetAppliedIndex(), st.GetLoggedTimeUnixMicros(), meta.Index, meta.LoggedTimeMicros)
	}
	if again := b.do(command("c1", 0, enqueue("m1"))); !bytes.Equal(again.GetReceipt(), first.GetReceipt()) {
		t.Fatalf("b replays c1 as %v, want a's receipt", again)
	}
}
