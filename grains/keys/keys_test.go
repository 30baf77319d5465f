package keys

import (
	"bytes"
	"testing"
)

func TestVisibilityQueuePrefixRecognizesOnlyVisibilityKeys(t *testing.T) {
	prefix := QueuePrefix("acme", "jobs")
	key := VisibilityKey("acme", "jobs", 1_700_000_000_000_000, 42)
	if got, ok := VisibilityQueuePrefix(key); !ok || !bytes.Equal(got, prefix) {
		t.Fatalf("VisibilityQueuePrefix(visibility key) = %x, %v; want %x", got, ok, prefix)
	}
	for name, k := range map[string][]byte{
		"queue prefix":               prefix,
		"end of a queue prefix":      append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1),
		"truncated":                  key[:len(key)-1],
		"longer":                     append(bytes.Clone(key), 0),
		"due key":                    Of(Due, AppendUint64(nil, 1)),
		"string longer than the key": append(Of(Visibility, nil), 0x7f, 'a'),
		"empty":                      nil,
	} {
		if got, ok := VisibilityQueuePrefix(k); ok {
			t.Errorf("%s: VisibilityQueuePrefix(%x) = %x, want not a visibility key", name, k, got)
		}
	}
}
