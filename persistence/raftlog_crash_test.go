package persistence

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// crashChildRoundsEnv, when set, is how many rounds the child persists before it waits to be
// killed.
const crashChildRoundsEnv = "ORRERY_RAFTLOG_CRASH_ROUNDS"

const (
	crashGroups     = 4
	crashPageBytes  = 4096
	crashEntryBytes = 1200 // a round spans more than a page of write-ahead log
)

// TestRaftLogPersistSurvivesCrash: a child process persists rounds (one entry per group and
// their hard states) and prints each round's index once Persist returned; the parent SIGKILLs
// it at a random moment: in odd iterations while it persists, in even ones once it has
// persisted a random number of rounds and waits (so that no later sync covers the last round). Every index the child printed must then be in the log, with no gap,
// in two images of the store:
//   - the directory as the kill left it (a process crash: the page cache survives);
//   - the directory with each write-ahead log replaced by the content it had when it was last
//     synced (a machine crash: what no sync covered is lost). The child records that content
//     from its sync hook, so a Persist that returns before its sync fails here.
func TestRaftLogPersistSurvivesCrash(t *testing.T) {
	if dir := crashChildDir(); dir != "" {
		crashChild(dir)
		return
	}
	t.Parallel()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for iteration := range 4 {
		dir := filepath.Join(t.TempDir(), "store")
		killAfter := 5 + rng.IntN(120)
		var env []string
		if iteration%2 == 0 {
			env = []string{crashChildRoundsEnv + "=" + strconv.Itoa(killAfter)}
		}
		reported := uint64(0)
		_, stderr := killChild(t, dir, env, func(line string) bool {
			if index, ok := strings.CutPrefix(line, "persisted "); ok {
				var err error
				if reported, err = strconv.ParseUint(index, 10, 64); err != nil {
					t.Fatalf("child printed %q", line)
				}
			}
			if reported < uint64(killAfter) {
				return false
			}
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // a random moment in the next round
			return true
		})
		if reported == 0 {
			t.Fatalf("seed %d iteration %d: the child reported nothing; stderr:\n%s", seed, iteration, stderr)
		}
		power := dir + "-power-loss"
		imageSyncedWALs(t, dir, power)
		checkCrashImage(t, dir, reported, fmt.Sprintf("seed %d iteration %d, process crash", seed, iteration))
		checkCrashImage(t, power, reported, fmt.Sprintf("seed %d iteration %d, machine crash", seed, iteration))
	}
}

// crashChild persists rounds until it is killed.
func crashChild(dir string) {
	s, err := OpenSiloStore(dir, crashGroups, quietOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s.wals.syncLog = recordSynced(dir + ".synced")
	rounds, _ := strconv.ParseUint(os.Getenv(crashChildRoundsEnv), 10, 64)
	if rounds == 0 {
		rounds = 100_000
	}
	data := bytes.Repeat([]byte{'z'}, crashEntryBytes)
	for index := uint64(1); index <= rounds; index++ {
		writes := make([]RaftWrite, crashGroups)
		for g := range writes {
			writes[g] = RaftWrite{
				Group:     g,
				Entries:   []*raftpb.Entry{{Index: new(index), Term: new(uint64(1)), Data: data}},
				HardState: hardState(1, 1, index),
			}
		}
		if err := s.RaftLog().Persist(writes); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("persisted %d\n", index)
	}
	select {}
}

// recordSynced syncs a write-ahead log and copies its pages from the last one copied before
// into a file of the same name under shadow: the image of the log a machine crash would leave.
// Badger creates a log zero-filled and appends to it, so its content ends at the first page
// of zeros.
func recordSynced(shadow string) func(f *os.File) error {
	ends := map[string]int64{}
	return func(f *os.File) error {
		if err := datasync(f); err != nil {
			return err
		}
		if err := os.MkdirAll(shadow, 0o750); err != nil {
			return err
		}
		out, err := os.OpenFile(filepath.Join(shadow, filepath.Base(f.Name())), os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			return err
		}
		defer out.Close()
		page := make([]byte, crashPageBytes)
		zero := make([]byte, crashPageBytes)
		off := ends[f.Name()]
		for {
			n, err := f.ReadAt(page, off)
			if n == 0 || bytes.Equal(page[:n], zero[:n]) {
				break
			}
			if _, err := out.WriteAt(page[:n], off); err != nil {
				return err
			}
			off += int64(n)
			if err != nil {
				break
			}
		}
		ends[f.Name()] = max(0, off-crashPageBytes) // the last page copied may fill up later
		return nil
	}
}

// imageSyncedWALs copies the store in dir to image, with each write-ahead log replaced by what
// its syncs covered (recordSynced), zeros beyond.
func imageSyncedWALs(t *testing.T, dir, image string) {
	t.Helper()
	if err := os.MkdirAll(image, 0o750); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		content, err := os.ReadFile(filepath.Join(dir, file.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file.Name(), ".mem") {
			synced, err := os.ReadFile(filepath.Join(dir+".synced", file.Name()))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			clear(content)
			copy(content, synced)
		}
		if err := os.WriteFile(filepath.Join(image, file.Name()), content, 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCrashImage opens the store in dir and checks that every group holds entries 1 to at
// least reported, with no gap, and a hard state that commits at least reported.
func checkCrashImage(t *testing.T, dir string, reported uint64, what string) {
	t.Helper()
	s := openSiloStore(t, dir, crashGroups)
	defer s.Close()
	for g := range crashGroups {
		st, err := s.RaftLog().Storage(g)
		if err != nil {
			t.Fatal(err)
		}
		last, _ := st.LastIndex()
		if last < reported {
			t.Errorf("%s: group %d ends at %d, but the child reported %d persisted", what, g, last, reported)
			continue
		}
		ents, err := st.Entries(1, last+1, math.MaxUint64)
		if err != nil || uint64(len(ents)) != last {
			t.Errorf("%s: group %d: Entries(1, %d) = %d entries, %v", what, g, last+1, len(ents), err)
			continue
		}
		for i, e := range ents {
			if e.GetIndex() != uint64(i)+1 || len(e.GetData()) != crashEntryBytes {
				t.Errorf("%s: group %d: entry %d is %d with %d bytes", what, g, i+1, e.GetIndex(), len(e.GetData()))
				break
			}
		}
		hard, _, err := st.InitialState()
		if err != nil || hard.GetCommit() < reported {
			t.Errorf("%s: group %d: hard state %v, %v; want a commit of at least %d", what, g, hard, err, reported)
		}
	}
}
