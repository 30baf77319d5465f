package keys

import (
	"bytes"
	"encoding/binary"
)

// MaxPriority is the highest priority a queue message may have; priorities run 0..MaxPriority.
const MaxPriority = 9

// bandMarker follows a queue prefix in the keys of its priority bands. An instant is 8 bytes
// big-endian of a value in [0, 2^63), and Orrery's instants end in 9999 (below 2^58), so no
// priority-0 entry's next byte is 0xFF: every band sorts after all of them.
const bandMarker = 0xFF

// bandsDirectory follows bandMarker in PriorityBandsKey; no priority is 0xFF.
const bandsDirectory = 0xFF

// PriorityBandPrefix is the prefix of queue (namespace, queue)'s visibility entries of one
// priority: the QueuePrefix itself for priority 0 (the layout of every queue that never uses
// priorities), QueuePrefix 0xFF byte(priority) for priorities 1..MaxPriority. Within a band the
// entries are ordered like priority 0's: visible time, then enqueue sequence.
func PriorityBandPrefix(namespace, queue string, priority int) []byte {
	k := QueuePrefix(namespace, queue)
	if priority == 0 {
		return k
	}
	return append(k, bandMarker, byte(priority))
}

// PriorityVisibilityKey is VisibilityKey in priority's band (VisibilityKey for priority 0).
func PriorityVisibilityKey(namespace, queue string, priority int, visibleAtMicros int64, sequence uint64) []byte {
	k := PriorityBandPrefix(namespace, queue, priority)
	k = AppendUint64(k, uint64(visibleAtMicros))
	return AppendUint64(k, sequence)
}

// PriorityBandsKey is the key of queue (namespace, queue)'s band directory: how many
// messages each priority band 1..MaxPriority holds. It sorts after every band.
func PriorityBandsKey(namespace, queue string) []byte {
	return append(QueuePrefix(namespace, queue), bandMarker, bandsDirectory)
}

// PriorityBandsQueuePrefix returns the QueuePrefix of a PriorityBandsKey, or false when key is
// not one.
func PriorityBandsQueuePrefix(key []byte) ([]byte, bool) {
	at, ok := queuePrefixEnd(key)
	if !ok || !bytes.Equal(key[at:], []byte{bandMarker, bandsDirectory}) {
		return nil, false
	}
	return key[:at], true
}

// VisibilityBandPrefix returns the PriorityBandPrefix of a visibility key, or false when key is
// not one: each band is its own queue-like index (kv.Floors).
func VisibilityBandPrefix(key []byte) ([]byte, bool) {
	at, ok := queuePrefixEnd(key)
	if !ok {
		return nil, false
	}
	priority, ok := bandOf(key[at:])
	if !ok {
		return nil, false
	}
	return key[:at+bandPrefixBytes(priority)], true
}

// VisibilityPriority decodes the priority band of a visibility key within queuePrefix.
func VisibilityPriority(queuePrefix, key []byte) (int, error) {
	if !bytes.HasPrefix(key, queuePrefix) {
		return 0, ErrMalformed
	}
	priority, ok := bandOf(key[len(queuePrefix):])
	if !ok {
		return 0, ErrMalformed
	}
	return priority, nil
}

// bandOf returns the priority of the entry whose key continues a queue prefix with rest, or
// false when rest is not an entry (an instant and a sequence, after a band's two bytes).
func bandOf(rest []byte) (int, bool) {
	switch {
	case len(rest) == 16 && rest[0] != bandMarker:
		return 0, true
	case len(rest) == 18 && rest[0] == bandMarker && rest[1] >= 1 && rest[1] <= MaxPriority:
		return int(rest[1]), true
	}
	return 0, false
}

// bandPrefixBytes is how many bytes a band's prefix adds to its queue prefix.
func bandPrefixBytes(priority int) int {
	if priority == 0 {
		return 0
	}
	return 2
}

// EncodePriorityBands encodes a band directory: the counts of bands 1..MaxPriority
// (counts[0] is not stored), 8 bytes big-endian each.
func EncodePriorityBands(counts [MaxPriority + 1]uint64) []byte {
	out := make([]byte, 0, 8*MaxPriority)
	for _, c := range counts[1:] {
		out = binary.BigEndian.AppendUint64(out, c)
	}
	return out
}

// DecodePriorityBands decodes a band directory (EncodePriorityBands).
func DecodePriorityBands(value []byte) ([MaxPriority + 1]uint64, error) {
	var counts [MaxPriority + 1]uint64
	if len(value) != 8*MaxPriority {
		return counts, ErrMalformed
	}
	for p := 1; p <= MaxPriority; p++ {
		counts[p] = binary.BigEndian.Uint64(value[8*(p-1):])
	}
	return counts, nil
}
