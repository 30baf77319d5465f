package kv

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// countingView counts the Gets that reach it.
type countingView struct {
	View
	gets int
}

func (c *countingView) Get(key []byte) ([]byte, bool, error) {
	c.gets++
	return c.View.Get(key)
}

// TestReadCacheMatchesReference drives random Gets, Sets, Deletes and Scans through a
// ReadCache over a Memory, some through Buffers committed into it, and checks every answer
// against a reference map.
func TestReadCacheMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringMatching(`[a-c]{1,2}`)
		base, ref := NewMemory(), reference{}
		for range rapid.IntRange(0, 10).Draw(t, "baseKeys") {
			k, v := key.Draw(t, "k"), rapid.StringMatching(`[0-9]`).Draw(t, "v")
			_ = base.Set([]byte(k), []byte(v))
			ref[k] = v
		}
		cache := NewReadCache(base, nil)
		for range rapid.IntRange(0, 40).Draw(t, "ops") {
			k := key.Draw(t, "k")
			var view View = cache
			buf := (*Buffer)(nil)
			if rapid.Bool().Draw(t, "buffered") {
				buf = NewBuffer(cache)
				view = buf
			}
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0:
				got, found, err := view.Get([]byte(k))
				want, wantFound := ref[k]
				if err != nil || found != wantFound || string(got) != want {
					t.Fatalf("Get(%q) = %q %v %v, want %q %v", k, got, found, err, want, wantFound)
				}
				if found {
					got[0] = 'X' // a caller may keep and change what Get returned
				}
			case 1:
				v := rapid.StringMatching(`[0-9]`).Draw(t, "v")
				_ = view.Set([]byte(k), []byte(v))
				ref[k] = v
			case 2:
				_ = view.Delete([]byte(k))
				delete(ref, k)
			case 3:
				if got, want := collect(t, view, []byte("a"), nil), ref.scan([]byte("a"), nil); !slices.Equal(got, want) {
					t.Fatalf("Scan = %v, want %v", got, want)
				}
			}
			if buf != nil {
				if err := buf.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got, want := collect(t, base, nil, nil), ref.scan(nil, nil); !slices.Equal(got, want) {
			t.Fatalf("parent holds %v, want %v", got, want)
		}
	})
}

// TestReadCacheReadsTheParentOncePerKey shows what the cache is for: repeated reads of one
// key, present or absent, and reads after a write cost no further parent reads.
func TestReadCacheReadsTheParentOncePerKey(t *testing.T) {
	mem := NewMemory()
	_ = mem.Set([]byte("schedule"), []byte("v1"))
	parent := &countingView{View: mem}
	cache := NewReadCache(parent, nil)
	for range 3 {
		if v, found, _ := cache.Get([]byte("schedule")); !found || string(v) != "v1" {
			t.Fatalf("Get(schedule) = %q %v", v, found)
		}
		if _, found, _ := cache.Get([]byte("absent")); found {
			t.Fatal("absent key found")
		}
	}
	_ = cache.Set([]byte("schedule"), []byte("v2"))
	if v, found, _ := cache.Get([]byte("schedule")); !found || string(v) != "v2" {
		t.Fatalf("Get(schedule) after a write = %q %v", v, found)
	}
	if parent.gets != 2 {
		t.Fatalf("parent read %d times, want 2 (once per key)", parent.gets)
	}
}

// TestWarmCacheAcrossTransactionsMatchesReference runs random transactions over a Memory, each
// through a ReadCache sharing one small Warm set (so it also starts over when full), some
// committed and promoted, some abandoned, and checks every read against a reference map.
func TestWarmCacheAcrossTransactionsMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringMatching(`[a-d]{1,2}`)
		base, ref := NewMemory(), reference{}
		warm := NewWarm(rapid.IntRange(1, 40).Draw(t, "warmBytes"))
		for range rapid.IntRange(1, 12).Draw(t, "transactions") {
			txn := NewBuffer(base) // stands for a store transaction: committed or dropped
			cache := NewReadCache(txn, warm)
			pending := reference{}
			for k, v := range ref {
				pending[k] = v
			}
			for range rapid.IntRange(0, 10).Draw(t, "ops") {
				k := key.Draw(t, "k")
				switch rapid.IntRange(0, 2).Draw(t, "op") {
				case 0:
					got, found, err := cache.Get([]byte(k))
					want, wantFound := pending[k]
					if err != nil || found != wantFound || string(got) != want {
						t.Fatalf("Get(%q) = %q %v %v, want %q %v", k, got, found, err, want, wantFound)
					}
				case 1:
					v := rapid.StringMatching(`[0-9]{1,3}`).Draw(t, "v")
					_ = cache.Set([]byte(k), []byte(v))
					pending[k] = v
				case 2:
					_ = cache.Delete([]byte(k))
					delete(pending, k)
				}
			}
			if rapid.Bool().Draw(t, "commit") {
				if err := txn.Commit(); err != nil {
					t.Fatal(err)
				}
				cache.Promote()
				ref = pending
			}
			if warm.bytes > warm.maxBytes {
				t.Fatalf("warm set holds %d bytes, bound %d", warm.bytes, warm.maxBytes)
			}
		}
	})
}

// TestWarmCacheSkipsTheStoreForRecurringReads: a key read in one committed transaction is
// read from the warm set by the next; an abandoned transaction teaches the warm set nothing.
func TestWarmCacheSkipsTheStoreForRecurringReads(t *testing.T) {
	mem := NewMemory()
	_ = mem.Set([]byte("schedule"), []byte("v1"))
	parent := &countingView{View: mem}
	warm := NewWarm(1 << 10)
	abandoned := NewReadCache(parent, warm)
	_, _, _ = abandoned.Get([]byte("schedule"))
	first := NewReadCache(parent, warm)
	_, _, _ = first.Get([]byte("schedule"))
	_, _, _ = first.Get([]byte("counters")) // absent
	_ = first.Set([]byte("counters"), []byte("1"))
	_ = first.Set([]byte("message"), []byte("m")) // only written: not remembered
	first.Promote()
	second := NewReadCache(parent, warm)
	if v, found, _ := second.Get([]byte("schedule")); !found || string(v) != "v1" {
		t.Fatalf("Get(schedule) = %q %v", v, found)
	}
	if v, found, _ := second.Get([]byte("counters")); !found || string(v) != "1" {
		t.Fatalf("Get(counters) = %q %v", v, found)
	}
	if parent.gets != 3 {
		t.Fatalf("the store was read %d times, want 3 (schedule by the abandoned and the first transaction, counters by the first)", parent.gets)
	}
	if warm.Len() != 2 {
		t.Fatalf("warm set holds %d keys, want 2 (schedule, counters)", warm.Len())
	}
}
