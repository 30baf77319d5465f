package keys

import (
	"bytes"
	"testing"
)

// lastInstant is input.MaxInstantMicros (keys does not import input): the last instant Orrery
// accepts, 9999-12-31T23:59:59.999999Z.
const lastInstant int64 = 253402300799999999

// TestPriorityBandsSortAfterEveryInstant: priority 0 keeps VisibilityKey's layout; a band's
// keys sort after every priority-0 key of the queue (up to the instant after the last one
// Orrery accepts), bands in priority order, and the band directory after every band; each
// band key is recognized as its queue's visibility key, of its band, with its instant.
func TestPriorityBandsSortAfterEveryInstant(t *testing.T) {
	prefix := QueuePrefix("acme", "jobs")
	if got := PriorityVisibilityKey("acme", "jobs", 0, 42, 7); !bytes.Equal(got, VisibilityKey("acme", "jobs", 42, 7)) {
		t.Fatalf("priority 0 key %x, want VisibilityKey's", got)
	}
	latest := VisibilityKey("acme", "jobs", lastInstant+1, ^uint64(0))
	previous := latest
	for p := 1; p <= MaxPriority; p++ {
		first := PriorityVisibilityKey("acme", "jobs", p, 0, 0)
		if bytes.Compare(first, previous) <= 0 {
			t.Fatalf("band %d's first key %x does not sort after %x", p, first, previous)
		}
		key := PriorityVisibilityKey("acme", "jobs", p, 1_700_000_000_000_000, 9)
		if q, ok := VisibilityQueuePrefix(key); !ok || !bytes.Equal(q, prefix) {
			t.Fatalf("band %d key: queue prefix %x, %v", p, q, ok)
		}
		if b, ok := VisibilityBandPrefix(key); !ok || !bytes.Equal(b, PriorityBandPrefix("acme", "jobs", p)) {
			t.Fatalf("band %d key: band prefix %x, %v", p, b, ok)
		}
		if at, err := VisibilityInstant(prefix, key); err != nil || at != 1_700_000_000_000_000 {
			t.Fatalf("band %d key: instant %d, %v", p, at, err)
		}
		if got, err := VisibilityPriority(prefix, key); err != nil || got != p {
			t.Fatalf("band %d key: priority %d, %v", p, got, err)
		}
		previous = PriorityVisibilityKey("acme", "jobs", p, lastInstant+1, ^uint64(0))
	}
	directory := PriorityBandsKey("acme", "jobs")
	if bytes.Compare(directory, previous) <= 0 || !bytes.HasPrefix(directory, prefix) {
		t.Fatalf("the band directory %x does not sort after band %d", directory, MaxPriority)
	}
	if _, ok := VisibilityQueuePrefix(directory); ok {
		t.Fatal("the band directory is taken for a visibility key")
	}
	if _, ok := VisibilityBandPrefix(directory); ok {
		t.Fatal("the band directory is taken for a band's key")
	}
	if q, ok := PriorityBandsQueuePrefix(directory); !ok || !bytes.Equal(q, prefix) {
		t.Fatalf("PriorityBandsQueuePrefix(directory) = %x, %v", q, ok)
	}
	if _, ok := PriorityBandsQueuePrefix(PriorityVisibilityKey("acme", "jobs", 3, 1, 1)); ok {
		t.Fatal("a band key is taken for the directory")
	}
	bad := append(QueuePrefix("acme", "jobs"), 0xFF, MaxPriority+1)
	if _, ok := VisibilityQueuePrefix(append(bad, make([]byte, 16)...)); ok {
		t.Fatal("a band above MaxPriority is taken for a visibility key")
	}
}

// TestPriorityBandsRoundTrip: a band directory decodes to the counts it encodes; a value of
// another length is malformed.
func TestPriorityBandsRoundTrip(t *testing.T) {
	var counts [MaxPriority + 1]uint64
	counts[1], counts[5], counts[MaxPriority] = 3, 1<<40, 1
	got, err := DecodePriorityBands(EncodePriorityBands(counts))
	if err != nil || got != counts {
		t.Fatalf("decoded %v, %v; want %v", got, err, counts)
	}
	if _, err := DecodePriorityBands([]byte{1, 2, 3}); err != ErrMalformed {
		t.Fatalf("a short value: %v, want ErrMalformed", err)
	}
}
