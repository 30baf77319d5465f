package persistence

import (
	"fmt"
	"testing"
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
