package due

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// mirrored applies every write to the store and, like a partition after a commit, to the head.
type mirrored struct {
	kv.View
	head *Head
}

func (m mirrored) Set(key, value []byte) error {
	m.head.Set(key, value)
	return m.View.Set(key, value)
}

func (m mirrored) Delete(key []byte) error {
	m.head.Delete(key)
	return m.View.Delete(key)
}

// TestHeadMirrorsTheIndexBeforeItsHorizon drives a store and a head with the same writes, loads
// and scans: the head always holds exactly the store's entries due before its horizon, and a
// scan it covers answers what a store scan answers (its next due instant may be the horizon
// instead, never later than the store's).
func TestHeadMirrorsTheIndexBeforeItsHorizon(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		store := kv.NewMemory()
		head := NewHead(rapid.IntRange(1, 8).Draw(t, "maxEntries"))
		view := mirrored{View: store, head: head}
		dueAt := map[string]int64{} // id → its entry's instant
		instant := rapid.Int64Range(1, 40)
		var continuation []byte
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				id := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}).Draw(t, "id")
				ref := &orreryv1.DueRef{Kind: orreryv1.DueKind_DUE_KIND_SCHEDULE, Lane: lane, Id: id,
					Token: rapid.Uint64Range(1, 9).Draw(t, "token"), DueAtUnixMicros: instant.Draw(t, "at")}
				if err := Move(view, dueAt[id], ref); err != nil {
					t.Fatal(err)
				}
				dueAt[id] = ref.GetDueAtUnixMicros()
			},
			"remove": func(t *rapid.T) {
				id := rapid.SampledFrom([]string{"a", "b", "c", "x"}).Draw(t, "id")
				if err := Remove(view, dueAt[id], orreryv1.DueKind_DUE_KIND_SCHEDULE, lane, id); err != nil {
					t.Fatal(err)
				}
				delete(dueAt, id)
			},
			"load": func(t *rapid.T) {
				from := int64(0)
				if rapid.Bool().Draw(t, "from earliest") && len(dueAt) > 0 {
					from = slices.Min(slices.Collect(mapValues(dueAt)))
				}
				if err := head.Load(store, from, rapid.Int64Range(0, 50).Draw(t, "until")); err != nil {
					t.Fatal(err)
				}
			},
			"scan": func(t *rapid.T) {
				now := rapid.Int64Range(0, 50).Draw(t, "now")
				budget := Budget{MaxRefs: rapid.IntRange(1, 4).Draw(t, "maxRefs")}
				if continuation != nil && rapid.Bool().Draw(t, "continue") {
					budget.After = continuation
				}
				got, ok, err := head.Scan(now, budget)
				if err != nil {
					t.Fatal(err)
				}
				// It must answer whenever it covers now; it may answer beyond (a budget cut
				// inside the head), and every answer must match the store's.
				if head.Covers(now) && !ok {
					t.Fatalf("Scan ok=false, Covers=true")
				}
				if !ok {
					return
				}
				want, err := ScanDue(store, now, budget)
				if err != nil {
					t.Fatal(err)
				}
				if ids(got.Refs) != ids(want.Refs) || got.More != want.More || string(got.Continuation) != string(want.Continuation) {
					t.Fatalf("head scan %s more=%v cont=%q; store scan %s more=%v cont=%q",
						ids(got.Refs), got.More, got.Continuation, ids(want.Refs), want.More, want.Continuation)
				}
				if got.NextDueAtMicros != want.NextDueAtMicros &&
					(got.NextDueAtMicros != head.Horizon() || (want.NextDueAtMicros != 0 && want.NextDueAtMicros < got.NextDueAtMicros)) {
					t.Fatalf("head next due %d (horizon %d); store next due %d", got.NextDueAtMicros, head.Horizon(), want.NextDueAtMicros)
				}
				continuation = got.Continuation
			},
			"": func(t *rapid.T) {
				if !head.loaded {
					return
				}
				var want []string
				err := store.Scan(keys.Of(keys.Due, nil), kv.PrefixEnd(keys.Due), func(key, value []byte) (bool, error) {
					if at, _ := DueAtOfKey(key); at < head.horizon {
						want = append(want, fmt.Sprintf("%x=%x", key, value))
					}
					return true, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range head.entries {
					got = append(got, fmt.Sprintf("%x=%x", e.key, e.value))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("head (horizon %d) holds %v, the store before the horizon %v", head.horizon, got, want)
				}
				if len(got) > head.maxEntries {
					t.Fatalf("head holds %d entries, its bound is %d", len(got), head.maxEntries)
				}
			},
		})
	})
}

func mapValues(m map[string]int64) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func TestHeadHorizonIsTheFirstEntryLeftOut(t *testing.T) {
	store := kv.NewMemory()
	put(t, store, 10, orreryv1.DueKind_DUE_KIND_SCHEDULE, "a", 1)
	put(t, store, 20, orreryv1.DueKind_DUE_KIND_SCHEDULE, "b", 1)
	put(t, store, 20, orreryv1.DueKind_DUE_KIND_SCHEDULE, "c", 1)
	put(t, store, 90, orreryv1.DueKind_DUE_KIND_SCHEDULE, "far", 1)
	head := NewHead(2)
	if head.Covers(0) {
		t.Fatal("an unloaded head covers a scan")
	}
	if err := head.Load(store, 0, 50); err != nil {
		t.Fatal(err)
	}
	// The bound of two would split instant 20: both of its entries stay out.
	if head.Len() != 1 || head.Horizon() != 20 || !head.Covers(19) || head.Covers(20) {
		t.Fatalf("len %d horizon %d", head.Len(), head.Horizon())
	}
	res, ok, err := head.Scan(15, Budget{MaxRefs: 10})
	if err != nil || !ok || ids(res.Refs) != "[a@10#1]" || res.NextDueAtMicros != 20 {
		t.Fatalf("scan at 15: %v %v %v", res, ok, err)
	}
	whole := NewHead(10)
	if err := whole.Load(store, 0, 1000); err != nil || whole.Horizon() != math.MaxInt64 || whole.Len() != 4 {
		t.Fatalf("loading the whole index: len %d horizon %d err %v", whole.Len(), whole.Horizon(), err)
	}
	res, _, _ = whole.Scan(1<<40, Budget{MaxRefs: 10})
	if len(res.Refs) != 4 || res.NextDueAtMicros != 0 {
		t.Fatalf("the whole index due: %s next %d", ids(res.Refs), res.NextDueAtMicros)
	}
}

// TestHeadKeepsOnlyNearEntries: after a Load up to some instant, an entry written at or after
// it is not kept; the horizon comes down to it, so a head loaded on an empty index does not
// fill with entries due far ahead.
func TestHeadKeepsOnlyNearEntries(t *testing.T) {
	store := kv.NewMemory()
	head := NewHead(100)
	if err := head.Load(store, 0, 100); err != nil || head.Horizon() != math.MaxInt64 {
		t.Fatalf("load of an empty index: horizon %d, %v", head.Horizon(), err)
	}
	view := mirrored{View: store, head: head}
	put(t, view, 50, orreryv1.DueKind_DUE_KIND_SCHEDULE, "near", 1)
	put(t, view, 500, orreryv1.DueKind_DUE_KIND_SCHEDULE, "far", 1)
	put(t, view, 900, orreryv1.DueKind_DUE_KIND_SCHEDULE, "farther", 1)
	if head.Len() != 1 || head.Horizon() != 500 {
		t.Fatalf("head holds %d entries with horizon %d, want 1 and 500", head.Len(), head.Horizon())
	}
	res, ok, err := head.Scan(60, Budget{MaxRefs: 10})
	if err != nil || !ok || ids(res.Refs) != "[near@50#1]" || res.NextDueAtMicros != 500 {
		t.Fatalf("scan at 60: %v ok=%v err=%v", res, ok, err)
	}
}
