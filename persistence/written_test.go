package persistence

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Written counts what an apply commits to the state (its sets and deletes, keys as stored,
// and the applied mark) and what a persist appends to the Raft log; an apply that fails adds
// nothing.
func TestWrittenCountsTheKeysAndBytesOfAppliesAndPersists(t *testing.T) {
	p := openState(t, t.TempDir(), quietOptions())
	s := p.store
	before := s.Written()
	update(t, p, func(txn *Txn) error {
		if err := txn.Set([]byte("a"), []byte("12345")); err != nil {
			return err
		}
		if err := txn.Set([]byte("bb"), []byte("xy")); err != nil {
			return err
		}
		return txn.Delete([]byte("c"))
	})
	got := s.Written().Sub(before)
	stored := func(k string) int { return len(p.prefix) + len(k) }
	mark := len(p.appliedKey) + 16
	wantBytes := stored("a") + 5 + stored("bb") + 2 + stored("c") + mark
	if got.StateKeys != 4 || got.StateBytes != uint64(wantBytes) {
		t.Fatalf("after an apply of two sets and a delete: %d keys, %d bytes; want 4 keys (the mark included), %d bytes", got.StateKeys, got.StateBytes, wantBytes)
	}
	if got.LogKeys != 0 || got.LogBytes != 0 {
		t.Fatalf("an apply counted %d log keys, %d bytes", got.LogKeys, got.LogBytes)
	}

	before = s.Written()
	if err := p.Apply(nextMark(p), func(txn *Txn) error {
		_ = txn.Set([]byte("d"), []byte("1"))
		return errors.New("the batch fails")
	}); err == nil {
		t.Fatal("a failing apply returned nil")
	}
	if got := s.Written().Sub(before); got != (WriteCounts{}) {
		t.Fatalf("a failed apply counted %+v", got)
	}

	before = s.Written()
	ents := entries(1, 3, 1)
	hs := &raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}
	if err := s.RaftLog().Persist([]RaftWrite{{Group: 0, Entries: ents, HardState: hs}}); err != nil {
		t.Fatal(err)
	}
	wantBytes = len(raftHardStateKey(0)) + proto.Size(hs)
	for _, e := range ents {
		wantBytes += len(raftEntryKey(0, e.GetIndex())) + proto.Size(e)
	}
	got = s.Written().Sub(before)
	if got.LogKeys != 4 || got.LogBytes != uint64(wantBytes) || got.StateKeys != 0 {
		t.Fatalf("after a persist of three entries and a hard state: %+v; want 4 log keys, %d log bytes", got, wantBytes)
	}
}
