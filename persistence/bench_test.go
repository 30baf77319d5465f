package persistence

import (
	"testing"

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
