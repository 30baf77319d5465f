package persistence

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// installChildKeys and installChildValueBytes size the state the child installs: several
// chunks, many transactions.
const (
	installChildKeys       = 2500
	installChildValueBytes = 1000
)

// childValue is the value of key i of the state tag.
func childValue(tag string, i int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "%s%02d.", tag, i%97), installChildValueBytes)[:installChildValueBytes]
}

// childPairs is the state writeChildState writes.
func childPairs(tag string) []pair {
	pairs := make([]pair, installChildKeys)
	for i := range pairs {
		pairs[i] = pair{fmt.Sprintf("%s/%06d", tag, i), string(childValue(tag, i))}
	}
	return pairs
}

// writeChildState writes childPairs(tag) into p in applies of 100 keys.
func writeChildState(p *PartitionState, tag string) error {
	for i := 0; i < installChildKeys; {
		err := p.Apply(nextMark(p), func(txn *Txn) error {
			for end := i + 100; i < end && i < installChildKeys; i++ {
				if err := txn.Set(fmt.Appendf(nil, "%s/%06d", tag, i), childValue(tag, i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestInstallIsDurableWhenItReturns: a child process fills partition 0, installs its snapshot
// into partition 1 (which held another state), prints the mark once Install returned, and is
// SIGKILLed. Partition 1 must then hold the installed state and mark with no key of another
// generation, both in the directory as the kill left it (a process crash) and with each
// write-ahead log cut back to what its syncs covered (a machine crash: the staged transactions
// are not synced, the switch's sync must cover them and itself).
func TestInstallIsDurableWhenItReturns(t *testing.T) {
	if dir := crashChildDir(); dir != "" {
		installChild(dir)
		return
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	var mark AppliedMark
	reported, stderr := killChild(t, dir, nil, func(line string) bool {
		_, err := fmt.Sscanf(line, "installed %d %d", &mark.Index, &mark.LoggedTimeMicros)
		return err == nil
	})
	if !reported {
		t.Fatalf("the child reported no install; stderr:\n%s", stderr)
	}
	power := dir + "-power-loss"
	imageSyncedWALs(t, dir, power)
	want := childPairs("new")
	for _, image := range []struct{ dir, what string }{{dir, "process crash"}, {power, "machine crash"}} {
		p := openPartition(t, image.dir, smallOptions(), 1)
		got := viewAll(t, p)
		if !slices.Equal(got, want) || p.Applied() != mark {
			t.Errorf("%s: partition 1 holds %d keys (the installed state: %v) at %+v, want %d at %+v",
				image.what, len(got), slices.Equal(got, want), p.Applied(), len(want), mark)
		}
		if stray := strayKeys(t, p); len(stray) > 0 {
			t.Errorf("%s: %d keys outside the current generation, first %s", image.what, len(stray), strings.Join(stray[:1], ""))
		}
		_ = p.store.Close()
	}
}

// installChild fills partition 1 with an old state and partition 0 with the new one, installs
// partition 0's snapshot into partition 1, prints the mark and waits to be killed.
func installChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := OpenSiloStore(dir, 2, smallOptions())
	if err != nil {
		fail(err)
	}
	s.wals.syncLog = recordSynced(dir + ".synced")
	src, _ := s.Partition(0)
	dst, _ := s.Partition(1)
	if err := writeChildState(dst, "old"); err != nil {
		fail(err)
	}
	if err := dst.Apply(nextMark(dst), func(*Txn) error { return nil }); err != nil { // a mark apart from the new one
		fail(err)
	}
	if err := writeChildState(src, "new"); err != nil {
		fail(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		fail(err)
	}
	if err := dst.Install(snap.Mark(), snap); err != nil {
		fail(err)
	}
	fmt.Printf("installed %d %d\n", snap.Mark().Index, snap.Mark().LoggedTimeMicros)
	select {}
}
