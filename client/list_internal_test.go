package client

import (
	"bytes"
	"testing"
)

// TestAListGoesOnPastAnEmptyFilteredPage: a partition that answers a filtered page with no
// record but a continuation (it scanned its bound without a match) is asked again from that
// continuation, not from where it stood, so the list ends with every match.
func TestAListGoesOnPastAnEmptyFilteredPage(t *testing.T) {
	// Partition 0 holds matches a and c; partition 1 passes over records up to m, then holds z.
	fetch := func(p int, after []byte, max uint32) ([]listItem, []byte, error) {
		item := func(pos string) listItem { return listItem{position: []byte(pos), value: pos} }
		switch {
		case p == 0 && after == nil:
			return []listItem{item("a"), item("c")}, nil, nil
		case p == 1 && after == nil:
			return nil, []byte("m"), nil
		case p == 1 && bytes.Equal(after, []byte("m")):
			return []listItem{item("z")}, nil, nil
		}
		t.Fatalf("partition %d asked after %q", p, after)
		return nil, nil, nil
	}
	var got []string
	var after []byte
	for range 10 {
		items, next, err := listPartitions(2, 10, after, fetch)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, it.value.(string))
		}
		if next == nil {
			if len(got) != 3 || got[0] != "a" || got[1] != "c" || got[2] != "z" {
				t.Fatalf("listed %v, want a c z", got)
			}
			return
		}
		after = next
	}
	t.Fatalf("the list never ended: %v", got)
}
