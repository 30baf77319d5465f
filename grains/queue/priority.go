package queue

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Priorities. A message of priority p > 0 keeps its visibility-index entry in its queue's band p
// (keys.PriorityBandPrefix); priority 0 keeps the layout of a queue that never uses
// priorities. The band directory (keys.PriorityBandsKey) counts the messages of each band
// 1..9, so a receive reads the bands that hold any (one point read for a queue that uses
// none). Among the entries visible at its logged time, a receive leases first the one with
// the smallest effective key: its visible time minus priority × Limits.PriorityStepMicros,
// then its enqueue sequence. A step of 0 is strict priority: the highest priority first, then
// visible time, then enqueue sequence (a lower priority waits as long as a higher one has
// visible messages).

// bandCounts reads queue (namespace, queue)'s band directory: how many messages each band
// 1..keys.MaxPriority holds (index 0 is not counted).
func bandCounts(v kv.Reader, namespace, queue string) ([keys.MaxPriority + 1]uint64, error) {
	value, found, err := v.Get(keys.PriorityBandsKey(namespace, queue))
	if err != nil || !found {
		return [keys.MaxPriority + 1]uint64{}, err
	}
	counts, err := keys.DecodePriorityBands(value)
	if err != nil {
		return counts, orrery.Wrap(orrery.CodeInternal, err, "priority bands of queue %q", queue)
	}
	return counts, nil
}

// countBand adds one message (or takes one off, when add is false) to the band directory of
// msg's queue; a priority-0 message is not counted. The directory is deleted once every band
// is empty, so a queue that stops using priorities leaves nothing behind.
func countBand(v kv.View, msg *orreryv1.QueueMessage, add bool) error {
	priority := msg.GetPriority()
	if priority == 0 {
		return nil
	}
	lane := msg.GetLane()
	counts, err := bandCounts(v, lane.GetNamespace(), lane.GetQueue())
	if err != nil {
		return err
	}
	switch {
	case add:
		counts[priority]++
	case counts[priority] == 0:
		return orrery.Errorf(orrery.CodeInternal, "priority band %d of queue %q holds no message to take off", priority, lane.GetQueue())
	default:
		counts[priority]--
	}
	key := keys.PriorityBandsKey(lane.GetNamespace(), lane.GetQueue())
	if counts == ([keys.MaxPriority + 1]uint64{}) {
		return v.Delete(key)
	}
	return v.Set(key, keys.EncodePriorityBands(counts))
}

// usedBands lists the priorities whose band of queue (namespace, queue) may hold entries: 0
// always, then every band the directory counts a message in, in ascending order.
func usedBands(v kv.Reader, namespace, queue string) ([]int, error) {
	counts, err := bandCounts(v, namespace, queue)
	if err != nil {
		return nil, err
	}
	bands := []int{0}
	for p := 1; p <= keys.MaxPriority; p++ {
		if counts[p] > 0 {
			bands = append(bands, p)
		}
	}
	return bands, nil
}

// bandCursor is what a visibleScan has left to read of one band: [start, end).
type bandCursor struct {
	priority   int
	prefix     []byte
	start, end []byte
}

// visibleScan reads the entries of a queue visible at an instant, across its bands, in
// effective order (see Priorities above).
type visibleScan struct {
	stepMicros int64
	bands      []bandCursor
}

// newVisibleScan starts reading the entries of queue (namespace, queue) visible at nowMicros.
func newVisibleScan(v kv.Reader, namespace, queue string, nowMicros, stepMicros int64) (*visibleScan, error) {
	bands, err := usedBands(v, namespace, queue)
	if err != nil {
		return nil, err
	}
	s := &visibleScan{stepMicros: stepMicros}
	for _, p := range bands {
		prefix := keys.PriorityBandPrefix(namespace, queue, p)
		s.bands = append(s.bands, bandCursor{
			priority: p,
			prefix:   prefix,
			start:    prefix,
			end:      keys.PriorityVisibilityKey(namespace, queue, p, nowMicros+1, 0),
		})
	}
	return s, nil
}

// next copies the first limit entries left, in effective order: up to limit of each band
// (at most keys.MaxPriority+1 seeks), merged. Within a band the effective order is the key
// order, so the first limit of the merge are among them.
func (s *visibleScan) next(v kv.Reader, limit int) ([]indexEntry, error) {
	var merged []indexEntry
	for i, b := range s.bands {
		entries, err := scanIndex(v, b.start, b.end, limit)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			rest := e.key[len(b.prefix):]
			if len(rest) != 16 {
				return nil, orrery.Errorf(orrery.CodeInternal, "visibility index key %x is malformed", e.key)
			}
			e.band = i
			e.effective = int64(binary.BigEndian.Uint64(rest)) - int64(b.priority)*s.stepMicros
			e.sequence = binary.BigEndian.Uint64(rest[8:])
			merged = append(merged, e)
		}
	}
	if len(s.bands) > 1 {
		slices.SortFunc(merged, func(x, y indexEntry) int {
			if s.stepMicros == 0 { // strict: the higher band first (s.bands ascend)
				if c := cmp.Compare(y.band, x.band); c != 0 {
					return c
				}
			}
			if c := cmp.Compare(x.effective, y.effective); c != 0 {
				return c
			}
			return cmp.Compare(x.sequence, y.sequence)
		})
	}
	return merged[:min(limit, len(merged))], nil
}

// handled records that e left the visible range (leased, swept or dead-lettered): its band is
// read on after it.
func (s *visibleScan) handled(e indexEntry) {
	s.bands[e.band].start = append(bytes.Clone(e.key), 0)
}

// remains reports whether any band still holds a visible entry past what was handled.
func (s *visibleScan) remains(v kv.Reader) (bool, error) {
	for _, b := range s.bands {
		rest, err := scanIndex(v, b.start, b.end, 1)
		if err != nil || len(rest) > 0 {
			return len(rest) > 0, err
		}
	}
	return false, nil
}

// firstVisibleBefore returns the earliest instant of queue (namespace, queue)'s visibility
// entries before limitMicros, in any band, reading each used band only up to there.
func firstVisibleBefore(v kv.Reader, namespace, queue string, limitMicros int64) (atMicros int64, found bool, err error) {
	bands, err := usedBands(v, namespace, queue)
	if err != nil {
		return 0, false, err
	}
	queuePrefix := keys.QueuePrefix(namespace, queue)
	for _, p := range bands {
		end := keys.PriorityVisibilityKey(namespace, queue, p, limitMicros, 0)
		at, ok, err := firstVisible(v, queuePrefix, keys.PriorityBandPrefix(namespace, queue, p), end)
		if err != nil {
			return 0, false, err
		}
		if ok && (!found || at < atMicros) {
			atMicros, found = at, true
		}
	}
	return atMicros, found, nil
}
