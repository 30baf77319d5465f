package kv

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func collect(t interface{ Fatal(...any) }, r Reader, start, end []byte) []string {
	var out []string
	err := r.Scan(start, end, func(k, v []byte) (bool, error) {
		out = append(out, string(k)+"="+string(v))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reference is a plain map with sorted scans: the oracle for Memory and Buffer.
type reference map[string]string

func (r reference) scan(start, end []byte) []string {
	var keys []string
	for k := range r {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + r[k]
	}
	return out
}

// TestBufferOverMemoryMatchesReference writes random keys through a Buffer over a Memory and
// checks every Get and Scan of the buffer against a reference map, then that Commit makes the
// Memory equal the reference and that a discarded buffer changes nothing.
func TestBufferOverMemoryMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.StringMatching(`[a-c]{1,3}`)
		base, ref := NewMemory(), reference{}
		for range rapid.IntRange(0, 20).Draw(t, "baseKeys") {
			k, v := key.Draw(t, "k"), rapid.StringMatching(`[0-9]`).Draw(t, "v")
			_ = base.Set([]byte(k), []byte(v))
			ref[k] = v
		}
		untouched := base.Clone()
		buf := NewBuffer(base)
		for range rapid.IntRange(0, 30).Draw(t, "ops") {
			k := key.Draw(t, "k")
			if rapid.Bool().Draw(t, "delete") {
				_ = buf.Delete([]byte(k))
				delete(ref, k)
			} else {
				v := rapid.StringMatching(`[0-9]`).Draw(t, "v")
				_ = buf.Set([]byte(k), []byte(v))
				ref[k] = v
			}
			probe := key.Draw(t, "probe")
			got, found, _ := buf.Get([]byte(probe))
			if want, ok := ref[probe]; found != ok || string(got) != want {
				t.Fatalf("Get(%s) = %q,%v want %q,%v", probe, got, found, want, ok)
			}
			start := []byte(key.Draw(t, "start"))
			var end []byte
			if rapid.Bool().Draw(t, "bounded") {
				end = []byte(key.Draw(t, "end"))
			}
			if got, want := collect(t, buf, start, end), ref.scan(start, end); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Scan(%s,%s) = %v want %v", start, end, got, want)
			}
		}
		if !base.Equal(untouched) {
			t.Fatal("an uncommitted buffer changed its parent")
		}
		if err := buf.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, want := collect(t, base, nil, nil), ref.scan(nil, nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after commit %v want %v", got, want)
		}
	})
}

func TestScanStopsEarly(t *testing.T) {
	m := NewMemory()
	for _, k := range []string{"a", "b", "c"} {
		_ = m.Set([]byte(k), []byte("1"))
	}
	b := NewBuffer(m)
	_ = b.Set([]byte("ab"), []byte("2"))
	var seen []string
	_ = b.Scan(nil, nil, func(k, v []byte) (bool, error) {
		seen = append(seen, string(k))
		return len(seen) < 2, nil
	})
	if fmt.Sprint(seen) != "[a ab]" {
		t.Fatalf("seen %v", seen)
	}
}

func TestPrefixEnd(t *testing.T) {
	cases := map[string]string{"a/": "a0", "a\xff": "b", "\xff\xff": ""}
	for in, want := range cases {
		if got := string(PrefixEnd([]byte(in))); got != want {
			t.Errorf("PrefixEnd(%q) = %q want %q", in, got, want)
		}
	}
}
