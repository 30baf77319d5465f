// Package retained owns the partition-wide account of retained schedule and saga records —
// how many there are and how many bytes they take — and enforces Limits.MaxPartitionRecords
// and Limits.MaxPartitionRecordBytes on every write that grows it, before the write. A record
// stored into an empty account marks the listing index complete (keys.ListIndexProgress):
// with no record stored before it, the index, which every record write keeps, covers them all.
package retained

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Store writes m under key and updates the account: a new key adds one record, and the byte
// count moves by the size difference. Growing past a limit fails QuotaExceeded (field
// "partition") and writes nothing.
func Store(v kv.View, lim input.Limits, key []byte, m proto.Message) error {
	_, _, err := Replace(v, lim, key, m)
	return err
}

// Replace is Store that also returns the encoding it replaced (found false when key held
// nothing), for a caller that keeps an index of what the record was.
func Replace(v kv.View, lim input.Limits, key []byte, m proto.Message) (old []byte, found bool, err error) {
	encoded, err := record.Marshal(m)
	if err != nil {
		return nil, false, err
	}
	old, found, err = v.Get(key)
	if err != nil {
		return nil, false, err
	}
	c, err := Load(v)
	if err != nil {
		return nil, false, err
	}
	records, bytes := c.GetRecords(), c.GetBytes()-uint64(len(old))
	if !found {
		records++
	}
	bytes += uint64(len(encoded))
	if records > c.GetRecords() && records > lim.MaxPartitionRecords {
		return nil, false, orrery.FieldErrorf(orrery.CodeQuotaExceeded, "partition", "partition retains %d schedule and saga records, the limit is %d", c.GetRecords(), lim.MaxPartitionRecords)
	}
	if bytes > c.GetBytes() && bytes > lim.MaxPartitionRecordBytes {
		return nil, false, orrery.FieldErrorf(orrery.CodeQuotaExceeded, "partition", "partition retains %d bytes of schedule and saga records; this write would make it %d, the limit is %d", c.GetBytes(), bytes, lim.MaxPartitionRecordBytes)
	}
	if err := v.Set(key, encoded); err != nil {
		return nil, false, err
	}
	if c.GetRecords() == 0 {
		if err := markIndexComplete(v); err != nil {
			return nil, false, err
		}
	}
	return old, found, save(v, records, bytes)
}

// Delete removes the record under key and takes it off the account.
func Delete(v kv.View, key []byte) error {
	old, found, err := v.Get(key)
	if err != nil || !found {
		return err
	}
	c, err := Load(v)
	if err != nil {
		return err
	}
	if err := v.Delete(key); err != nil {
		return err
	}
	return save(v, c.GetRecords()-1, c.GetBytes()-uint64(len(old)))
}

// Load reads the account (zero when absent).
func Load(v kv.Reader) (*orreryv1.PartitionCounters, error) {
	c := &orreryv1.PartitionCounters{}
	_, err := record.Load(v, keys.PartitionCounters, c)
	return c, err
}

// markIndexComplete records that the listing index covers every record, unless it says so.
func markIndexComplete(v kv.View) error {
	progress := &orreryv1.ListIndexProgress{}
	if _, err := record.Load(v, keys.ListIndexProgress, progress); err != nil || progress.GetComplete() {
		return err
	}
	_, err := record.Store(v, keys.ListIndexProgress, &orreryv1.ListIndexProgress{Complete: true})
	return err
}

func save(v kv.View, records, bytes uint64) error {
	_, err := record.Store(v, keys.PartitionCounters, &orreryv1.PartitionCounters{Records: records, Bytes: bytes})
	return err
}
