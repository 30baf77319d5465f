package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// benchmarkCommit commits batches of 256 records (60-byte key, 300-byte value) durably, one
// Update per batch, and reports records and commits per second.
func benchmarkCommit(b *testing.B, opts Options) {
	s := openStore(b, b.TempDir(), opts)
	value := make([]byte, 300)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	const perBatch = 256
	batches := 0
	for b.Loop() {
		batch := batches
		err := s.Update(func(txn *Txn) error {
			for j := range perBatch {
				key := fmt.Appendf(nil, "m/bench/queue/lane-%08d/message-%032d", batch, j) // 60 bytes
				if err := txn.Set(key, value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		batches++
	}
	seconds := b.Elapsed().Seconds()
	b.ReportMetric(float64(batches*perBatch)/seconds, "records/s")
	b.ReportMetric(float64(batches)/seconds, "commits/s")
}

// BenchmarkCommit256 commits with the production options: each Update applies its batch and
// then syncs the write-ahead log (Store.Sync).
func BenchmarkCommit256(b *testing.B) { benchmarkCommit(b, quietOptions()) }

// BenchmarkRaftLogPersist persists rounds of one 300-byte entry and a hard state for each of
// 32 groups and reports rounds and entries per second: "silo-store" makes a round one
// BadgerRaftLog.Persist (one write, one sync); "store-per-partition" writes the same round
// into 32 partition stores, each syncing its own, concurrently, as 32 partitions do.
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
	b.Run("store-per-partition", func(b *testing.B) {
		stores := make([]*Store, groups)
		for g := range stores {
			stores[g] = openStore(b, filepath.Join(b.TempDir(), strconv.Itoa(g)), quietOptions())
		}
		rounds := 0
		for b.Loop() {
			index := uint64(rounds + 1)
			var wg sync.WaitGroup
			errs := make([]error, groups)
			for g, s := range stores {
				wg.Go(func() {
					errs[g] = s.Update(func(txn *Txn) error {
						entry, err := proto.Marshal(&raftpb.Entry{Index: new(index), Term: new(uint64(1)), Data: data})
						if err != nil {
							return err
						}
						hard, err := proto.Marshal(hardState(1, 1, index))
						if err != nil {
							return err
						}
						if err := txn.Set(binary.BigEndian.AppendUint64([]byte("raft/entry/"), index), entry); err != nil {
							return err
						}
						return txn.Set([]byte("raft/hard-state"), hard)
					})
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			rounds++
		}
		report(b, rounds)
	})
}
