package persistence

import "sync/atomic"

// WriteCounts are the writes the store made since it opened, in two parts: the sets and
// deletes of the partitions' applies on their states (the applied mark included; a key set
// twice in one apply counts twice, though Badger keeps the last) and what the Raft rounds
// appended to the log (entries and hard states). Bytes count keys and values as stored (a
// delete counts its key), before Badger's own copies (its write-ahead log, memtable flushes
// and compactions). They are what one occurrence costs the store, once divided by the
// occurrences of a run.
type WriteCounts struct {
	StateKeys, StateBytes uint64
	LogKeys, LogBytes     uint64
}

// Sub is c less an earlier reading before: what was written between the two.
func (c WriteCounts) Sub(before WriteCounts) WriteCounts {
	return WriteCounts{
		StateKeys: c.StateKeys - before.StateKeys, StateBytes: c.StateBytes - before.StateBytes,
		LogKeys: c.LogKeys - before.LogKeys, LogBytes: c.LogBytes - before.LogBytes,
	}
}

// writeCounters accumulates WriteCounts without a lock.
type writeCounters struct {
	stateKeys, stateBytes, logKeys, logBytes atomic.Uint64
}

func (w *writeCounters) addState(keys, bytes int) {
	w.stateKeys.Add(uint64(keys))
	w.stateBytes.Add(uint64(bytes))
}

func (w *writeCounters) addLog(keys, bytes int) {
	w.logKeys.Add(uint64(keys))
	w.logBytes.Add(uint64(bytes))
}

// Written returns the keys and bytes the store's applies and Raft rounds have written since
// it opened.
func (s *SiloStore) Written() WriteCounts {
	return WriteCounts{
		StateKeys: s.written.stateKeys.Load(), StateBytes: s.written.stateBytes.Load(),
		LogKeys: s.written.logKeys.Load(), LogBytes: s.written.logBytes.Load(),
	}
}
