package persistence

import (
	"math"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// BenchmarkRaftLogPersist persists rounds of one 300-byte entry and a hard state for each of
// 32 groups and reports rounds and entries per second: a round is one BadgerRaftLog.Persist
// (one write, one sync).
func BenchmarkRaftLogPersist(b *testing.B) {
	const groups = 32
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	report := func(b *testing.B, rounds int) {
		seconds := b.Elapsed().Seconds()
		b.ReportMetric(float64(rounds)/seconds, "rounds/s")
		b.ReportMetric(float64(rounds*groups)/seconds, "entries/s")
	}
	b.Run("silo-store", func(b *testing.B) {
		s, err := OpenSiloStore(b.TempDir(), groups, quietOptions())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		rounds := 0
		for b.Loop() {
			index := uint64(rounds + 1)
			writes := make([]RaftWrite, groups)
			for g := range writes {
				writes[g] = RaftWrite{
					Group:     g,
					Entries:   []*raftpb.Entry{{Index: new(index), Term: new(uint64(1)), Data: data}},
					HardState: hardState(1, 1, index),
				}
			}
			if err := s.RaftLog().Persist(writes); err != nil {
				b.Fatal(err)
			}
			rounds++
		}
		report(b, rounds)
	})
}

// BenchmarkRaftLogReadBack reads back, through each group's raft.Storage, the entries a round
// of three 300-byte entries for each of 32 groups persisted, as a leader's Raft reads them the
// round after, when they commit; it reports the read's time per round (the persist is not
// timed).
func BenchmarkRaftLogReadBack(b *testing.B) {
	const groups, perRound = 32, 3
	s, err := OpenSiloStore(b.TempDir(), groups, quietOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	storages := make([]raft.Storage, groups)
	for g := range storages {
		if storages[g], err = s.RaftLog().Storage(g); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, 300)
	next := uint64(1)
	for b.Loop() {
		b.StopTimer()
		writes := make([]RaftWrite, groups)
		for g := range writes {
			writes[g] = RaftWrite{Group: g, HardState: hardState(1, 1, next-1)}
			for i := range uint64(perRound) {
				writes[g].Entries = append(writes[g].Entries, &raftpb.Entry{Index: new(next + i), Term: new(uint64(1)), Data: data})
			}
		}
		if err := s.RaftLog().Persist(writes); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, st := range storages {
			ents, err := st.Entries(next, next+perRound, math.MaxUint64)
			if err != nil || len(ents) != perRound {
				b.Fatalf("Entries(%d, %d): %d entries, %v", next, next+perRound, len(ents), err)
			}
		}
		next += perRound
	}
}
