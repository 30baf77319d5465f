package kv

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// testIndexPrefix recognizes the test's queue-like indexes: "q/<one byte>" then two bytes.
func testIndexPrefix(key []byte) ([]byte, bool) {
	if len(key) != 5 || string(key[:2]) != "q/" {
		return nil, false
	}
	return key[:3], true
}

// TestFloorViewScansMatchThePlainView runs transactions through a FloorView over a buffer and
// compares every scan with the same scan of the buffer itself, while the floors are learnt,
// lowered, promoted on commit and dropped on abandon.
func TestFloorViewScansMatchThePlainView(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		store := NewMemory()
		maxIndexes := rapid.IntRange(1, 3).Draw(t, "maxIndexes")
		floors := NewFloors(testIndexPrefix, maxIndexes)
		replica := NewFloors(testIndexPrefix, maxIndexes) // adopts every promote (Reader)
		index := rapid.SampledFrom([]string{"a", "b", "c"})
		key := func(t *rapid.T, label string) []byte {
			return fmt.Appendf(nil, "q/%s%c%c", index.Draw(t, label+" index"), 'a'+rapid.IntRange(0, 4).Draw(t, label+" hi"), 'a'+rapid.IntRange(0, 4).Draw(t, label+" lo"))
		}
		var buf *Buffer
		var view *FloorView
		begin := func() {
			buf = NewBuffer(store)
			view = floors.View(buf)
		}
		begin()
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				if err := view.Set(key(t, "set"), []byte("v")); err != nil {
					t.Fatal(err)
				}
			},
			"delete": func(t *rapid.T) {
				if err := view.Delete(key(t, "delete")); err != nil {
					t.Fatal(err)
				}
			},
			"other key": func(t *rapid.T) {
				if err := view.Set([]byte("x/"+index.Draw(t, "other")), []byte("v")); err != nil {
					t.Fatal(err)
				}
			},
			"scan": func(t *rapid.T) {
				i := index.Draw(t, "scan index")
				start := []byte("q/" + i)
				if rapid.Bool().Draw(t, "from inside") {
					start = key(t, "start")
				}
				end := key(t, "end")
				limit := rapid.IntRange(1, 30).Draw(t, "limit")
				writeDuring := rapid.Bool().Draw(t, "write during the scan")
				var got, want []string
				collect := func(out *[]string) func(k, v []byte) (bool, error) {
					return func(k, _ []byte) (bool, error) {
						*out = append(*out, string(k))
						return len(*out) < limit, nil
					}
				}
				if err := buf.Scan(start, end, collect(&want)); err != nil {
					t.Fatal(err)
				}
				if err := view.Scan(start, end, collect(&got)); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("Scan(%q, %q) through the floors = %v, the buffer = %v", start, end, got, want)
				}
				if writeDuring { // collect first, then write: a receive's pattern
					for _, k := range got {
						if err := view.Delete([]byte(k)); err != nil {
							t.Fatal(err)
						}
					}
				}
			},
			"commit": func(t *rapid.T) {
				if err := buf.Commit(); err != nil {
					t.Fatal(err)
				}
				replica.Adopt(view.Promote())
				begin()
			},
			"replica scan": func(t *rapid.T) {
				// A reader through the replica reads the committed state the floors describe.
				i := index.Draw(t, "replica scan index")
				start := []byte("q/" + i)
				if rapid.Bool().Draw(t, "replica from inside") {
					start = key(t, "replica start")
				}
				end := key(t, "replica end")
				var got, want []string
				all := func(out *[]string) func(k, v []byte) (bool, error) {
					return func(k, _ []byte) (bool, error) {
						*out = append(*out, string(k))
						return true, nil
					}
				}
				if err := store.Scan(start, end, all(&want)); err != nil {
					t.Fatal(err)
				}
				if err := replica.Reader(store).Scan(start, end, all(&got)); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("Scan(%q, %q) through the replica's reader = %v, the store = %v", start, end, got, want)
				}
			},
			"abandon": func(t *rapid.T) {
				begin()
			},
		})
	})
}

func TestFloorViewStartsScansAtTheFloor(t *testing.T) {
	store := NewMemory()
	for _, k := range []string{"q/aaa", "q/aab", "q/abb", "q/acc"} {
		if err := store.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	floors := NewFloors(testIndexPrefix, 10)
	view := floors.View(store)
	var first []string
	if err := view.Scan([]byte("q/a"), []byte("q/azz"), func(k, _ []byte) (bool, error) {
		first = append(first, string(k))
		return len(first) < 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range first {
		if err := view.Delete([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	// The next scan from the front steps over the deleted keys once and learns the floor.
	if err := view.Scan([]byte("q/a"), []byte("q/azz"), func(k, _ []byte) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	view.Promote()
	// Plant a key below the learnt floor behind the floors' back: a scan from the front no
	// longer reads there, which is the point (a real store only has tombstones there).
	if err := store.Set([]byte("q/aaa"), []byte("planted")); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := floors.View(store).Scan([]byte("q/a"), []byte("q/azz"), func(k, _ []byte) (bool, error) {
		got = append(got, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"q/abb", "q/acc"}; !slices.Equal(got, want) {
		t.Fatalf("scan from the front after the floor moved = %v, want %v", got, want)
	}
}

// TestFloorsReaderStartsAtTheAdoptedFloor: a replica that adopted a promote starts a read
// from an index's front at the floor, like the writer's own views.
func TestFloorsReaderStartsAtTheAdoptedFloor(t *testing.T) {
	store := NewMemory()
	for _, k := range []string{"q/aab", "q/abb"} {
		if err := store.Set([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	floors, replica := NewFloors(testIndexPrefix, 10), NewFloors(testIndexPrefix, 10)
	view := floors.View(store)
	if err := view.Delete([]byte("q/aab")); err != nil {
		t.Fatal(err)
	}
	if err := view.Scan([]byte("q/a"), []byte("q/azz"), func(k, _ []byte) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	replica.Adopt(view.Promote())
	if err := store.Set([]byte("q/aaa"), []byte("planted")); err != nil { // below the floor
		t.Fatal(err)
	}
	var got []string
	if err := replica.Reader(store).Scan([]byte("q/a"), []byte("q/azz"), func(k, _ []byte) (bool, error) {
		got = append(got, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"q/abb"}; !slices.Equal(got, want) {
		t.Fatalf("replica scan from the front = %v, want %v (from the floor)", got, want)
	}
}
