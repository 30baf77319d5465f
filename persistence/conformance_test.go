package persistence

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/orreryhq/orrery/grains/kv"
)

// The conformance suite runs the same scenario against kv.Memory (the in-memory twin) and a
// Badger Txn (the real seam) and requires identical transcripts (STYLE B11).

var errStop = errors.New("stop from fn")

// transcript records what a scenario observed, one line per observation.
type transcript struct{ lines []string }

func (tr *transcript) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *transcript) get(v kv.Reader, key string) {
	value, found, err := v.Get([]byte(key))
	tr.add("get %q = %q %v %v", key, value, found, err)
}

func (tr *transcript) scan(v kv.Reader, start, end []byte) {
	var got []string
	err := v.Scan(start, end, func(key, value []byte) (bool, error) {
		got = append(got, fmt.Sprintf("%q=%q", key, value))
		return true, nil
	})
	tr.add("scan [%q, %q) = %s %v", start, end, strings.Join(got, " "), err)
}

func (tr *transcript) write(what string, err error) {
	tr.add("%s: %v", what, err)
}

// conformanceScenario exercises sets, deletes, gets, scans with every kind of bound, early
// stops, errors from fn, nested scans, deletes of visited keys during a scan, and nested
// buffers that are committed or discarded.
func conformanceScenario(v kv.View) []string {
	tr := &transcript{}
	set := func(view kv.View, k, val string) { tr.write("set "+k, view.Set([]byte(k), []byte(val))) }
	del := func(view kv.View, k string) { tr.write("delete "+k, view.Delete([]byte(k))) }

	for _, k := range []string{"b", "a", "ab", "abc", "b\xff", "b\xff\xff", "c", "d/1", "d/10", "d/2", "\x00", "\xff"} {
		set(v, k, "v-"+k)
	}
	set(v, "e", "") // empty value
	set(v, "b", "overwritten")
	del(v, "c")
	del(v, "never-there")
	for _, k := range []string{"a", "b", "c", "e", "never-there", "ab\x00"} {
		tr.get(v, k)
	}
	for _, r := range [][2][]byte{
		{nil, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("ab"), nil},
		{[]byte("b"), []byte("b")},
		{[]byte("c"), []byte("a")},
		{[]byte("b"), kv.PrefixEnd([]byte("b"))},
		{[]byte("b\xff"), kv.PrefixEnd([]byte("b\xff"))},
		{[]byte("\x00"), []byte("\x00\x00")},
		{[]byte("zzz"), nil},
		{nil, []byte("ab")},
	} {
		tr.scan(v, r[0], r[1])
	}

	// Early stop and an error from fn.
	n := 0
	err := v.Scan(nil, nil, func(key, _ []byte) (bool, error) { n++; return n < 2, nil })
	tr.add("stop after 2: %d %v", n, err)
	err = v.Scan([]byte("d/"), nil, func(key, _ []byte) (bool, error) { return true, errStop })
	tr.add("fn error: %v", errors.Is(err, errStop))

	// A scan inside a scan.
	var pairs []string
	err = v.Scan([]byte("a"), []byte("b"), func(outer, _ []byte) (bool, error) {
		return true, v.Scan(outer, nil, func(inner, _ []byte) (bool, error) {
			pairs = append(pairs, string(outer)+">"+string(inner))
			return false, nil
		})
	})
	tr.add("nested scans: %q %v", pairs, err)

	// Deleting each key as it is visited.
	err = kv.ScanPrefix(v, []byte("d/"), func(key, _ []byte) (bool, error) {
		return true, v.Delete(slices.Clone(key))
	})
	tr.add("delete while scanning: %v", err)
	tr.scan(v, []byte("d/"), []byte("d0"))

	// A buffer over the view, committed.
	buf := kv.NewBuffer(v)
	set(buf, "a", "from buffer")
	del(buf, "ab")
	set(buf, "bb", "new in buffer")
	del(buf, "zz-absent")
	tr.get(buf, "ab")
	tr.get(buf, "a")
	tr.scan(buf, nil, nil)
	tr.scan(buf, []byte("ab"), []byte("c"))
	tr.scan(v, nil, nil) // the parent does not see the buffer yet
	tr.write("commit buffer", buf.Commit())
	tr.scan(v, nil, nil)

	// A buffer in a buffer: the inner one committed into the outer, the outer discarded.
	outer := kv.NewBuffer(v)
	set(outer, "a", "outer")
	inner := kv.NewBuffer(outer)
	del(inner, "a")
	set(inner, "f", "inner")
	tr.scan(inner, nil, nil)
	tr.write("commit inner", inner.Commit())
	tr.scan(outer, nil, nil)
	// outer is dropped: nothing reaches v.
	tr.scan(v, nil, nil)
	return tr.lines
}

func TestConformanceScenario(t *testing.T) {
	t.Parallel()
	memory := kv.NewMemory()
	want := conformanceScenario(memory)

	s := openState(t, t.TempDir(), quietOptions())
	var got []string
	update(t, s, func(txn *Txn) error {
		got = conformanceScenario(txn)
		return nil
	})
	compareTranscripts(t, got, want)

	// The committed state equals the twin's, and survives a reopen.
	wantState := collect(t, memory, nil, nil)
	if state := viewAll(t, s); !slices.Equal(state, wantState) {
		t.Fatalf("committed state:\n got %q\nwant %q", state, wantState)
	}
	s = reopen(t, s)
	if state := viewAll(t, s); !slices.Equal(state, wantState) {
		t.Fatalf("state after reopen:\n got %q\nwant %q", state, wantState)
	}
}

func compareTranscripts(t testing.TB, got, want []string) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("step %d differs:\n badger %s\n memory %s", i, g, w)
		}
	}
}

// TestConformanceRandom runs random operation sequences, including nested buffers, against
// both implementations. Each sequence runs in a Badger transaction that is then discarded, so
// every sequence starts from the same committed state.
func TestConformanceRandom(t *testing.T) {
	t.Parallel()
	s := openState(t, t.TempDir(), quietOptions())
	update(t, s, func(txn *Txn) error { // a committed base state under the transaction
		for _, k := range []string{"a", "ab", "b", "p", "p0", "\xff"} {
			if err := txn.Set([]byte(k), []byte("base-"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	base := kv.NewMemory()
	for _, p := range viewAll(t, s) {
		_ = base.Set([]byte(p.key), []byte(p.value))
	}
	// Keys over a small alphabet that never spells the reserved "p/".
	keyGen := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 'a', 'b', 'p', 0xff}), 1, 3)
	rapid.Check(t, func(rt *rapid.T) {
		ops := rapid.SliceOfN(rapid.IntRange(0, 6), 1, 40).Draw(rt, "ops")
		memory := []kv.View{base.Clone()}
		err := s.Apply(nextMark(s), func(txn *Txn) error {
			badger := []kv.View{txn}
			for i, op := range ops {
				want := &transcript{}
				got := &transcript{}
				key := keyGen.Draw(rt, fmt.Sprintf("key%d", i))
				mTop, bTop := memory[len(memory)-1], badger[len(badger)-1]
				switch op {
				case 0:
					value := fmt.Appendf(nil, "v%d", i)
					want.write("set", mTop.Set(key, value))
					got.write("set", bTop.Set(key, value))
				case 1:
					want.write("delete", mTop.Delete(key))
					got.write("delete", bTop.Delete(key))
				case 2:
					want.get(mTop, string(key))
					got.get(bTop, string(key))
				case 3:
					var end []byte
					if rapid.Bool().Draw(rt, fmt.Sprintf("bounded%d", i)) {
						end = keyGen.Draw(rt, fmt.Sprintf("end%d", i))
					}
					want.scan(mTop, key, end)
					got.scan(bTop, key, end)
				case 4: // open a nested buffer
					memory = append(memory, kv.NewBuffer(mTop))
					badger = append(badger, kv.NewBuffer(bTop))
				case 5, 6: // commit (5) or discard (6) the innermost buffer
					if len(memory) == 1 {
						continue
					}
					if op == 5 {
						want.write("commit", mTop.(*kv.Buffer).Commit())
						got.write("commit", bTop.(*kv.Buffer).Commit())
					}
					memory, badger = memory[:len(memory)-1], badger[:len(badger)-1]
				}
				if !slices.Equal(got.lines, want.lines) {
					rt.Fatalf("op %d (%d) on key %q:\n badger %q\n memory %q", i, op, key, got.lines, want.lines)
				}
			}
			want, got := &transcript{}, &transcript{}
			want.scan(memory[0], nil, nil)
			got.scan(badger[0], nil, nil)
			if !slices.Equal(got.lines, want.lines) {
				rt.Fatalf("final state:\n badger %q\n memory %q", got.lines, want.lines)
			}
			return errDiscard
		})
		if !errors.Is(err, errDiscard) {
			rt.Fatalf("Update: %v", err)
		}
	})
	if state := viewAll(t, s); len(state) != 6 {
		t.Errorf("discarded sequences changed the committed state: %q", state)
	}
}
