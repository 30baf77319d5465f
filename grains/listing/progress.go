package listing

import (
	"bytes"
	"slices"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
	"github.com/orreryhq/orrery/grains/saga"
	"github.com/orreryhq/orrery/grains/schedule"
)

// Ready reports whether the listing index covers every schedule and saga record: its
// progress says complete, or the partition retains no record at all.
func Ready(r kv.Reader) (bool, error) {
	progress, err := loadProgress(r)
	if err != nil || progress.GetComplete() {
		return err == nil, err
	}
	counters, err := retained.Load(r)
	return err == nil && counters.GetRecords() == 0, err
}

func requireReady(r kv.Reader) error {
	ready, err := Ready(r)
	if err != nil {
		return err
	}
	if !ready {
		return orrery.Errorf(orrery.CodeUnavailable, "the partition's listing index is being built from its records; retry")
	}
	return nil
}

// BuildDue reports whether Build has work: records the index may not cover yet.
func BuildDue(r kv.Reader) (bool, error) {
	ready, err := Ready(r)
	return err == nil && !ready, err
}

// Build indexes, in key order and at most maxRecords, the schedule and saga records after
// the progress's position (records stored before the index existed; those written since are
// indexed already, and indexing them again writes the same entry). It records how far it got,
// and complete once it reached the last record; more is set when records remain.
func Build(v kv.View, maxRecords int) (built int, more bool, err error) {
	progress, err := loadProgress(v)
	if err != nil || progress.GetComplete() {
		return 0, false, err
	}
	after := progress.GetAfterKey()
	var entries [][]byte
	var last []byte
	for _, prefix := range recordPrefixes() {
		start, end := keys.Of(prefix, nil), kv.PrefixEnd(prefix)
		if bytes.Compare(after, end) >= 0 {
			continue
		}
		if bytes.Compare(after, start) >= 0 {
			start = append(bytes.Clone(after), 0)
		}
		err := v.Scan(start, end, func(key, value []byte) (bool, error) {
			if built == maxRecords {
				more = true
				return false, nil
			}
			entry, err := indexEntry(prefix, value)
			if err != nil {
				return false, orrery.Wrap(orrery.CodeInternal, err, "index record %x", key)
			}
			entries = append(entries, entry)
			last = bytes.Clone(key)
			built++
			return true, nil
		})
		if err != nil {
			return 0, false, err
		}
		if more {
			break
		}
	}
	for _, entry := range entries {
		if err := v.Set(entry, nil); err != nil {
			return 0, false, err
		}
	}
	next := &orreryv1.ListIndexProgress{Complete: !more, AfterKey: last}
	if !more {
		next.AfterKey = nil
	}
	_, err = record.Store(v, keys.ListIndexProgress, next)
	return built, more, err
}

// recordPrefixes are the prefixes of the records the index covers, in key order (the order
// Build walks them in).
func recordPrefixes() [][]byte {
	prefixes := [][]byte{keys.Schedule, keys.Saga}
	slices.SortFunc(prefixes, bytes.Compare)
	return prefixes
}

// indexEntry is the listing index entry of a record stored under a key of prefix.
func indexEntry(prefix, encoded []byte) ([]byte, error) {
	if bytes.Equal(prefix, keys.Schedule) {
		rec, err := schedule.Decode(encoded)
		if err != nil {
			return nil, err
		}
		return schedule.IndexKey(rec), nil
	}
	rec := &orreryv1.SagaRecord{}
	if err := record.Unmarshal(encoded, rec); err != nil {
		return nil, err
	}
	return saga.IndexKey(rec), nil
}

func loadProgress(r kv.Reader) (*orreryv1.ListIndexProgress, error) {
	progress := &orreryv1.ListIndexProgress{}
	_, err := record.Load(r, keys.ListIndexProgress, progress)
	return progress, err
}
