package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/silo"
)

// mountTmpfs mounts a tmpfs of size bytes on a temporary directory, unmounted when the test
// ends (after the silos it holds are stopped, which were started later), and returns its path.
// The test is skipped where mounting is not allowed (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): a real full disk needs root", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// freeBytes is the free space of the file system holding dir, as the silo reads it.
func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// fill writes to path, in 1 MiB chunks, until the file system's free space is at most leave
// bytes, or, with leave 0, until it refuses a write (ENOSPC).
func fill(t *testing.T, path string, leave uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i) // tmpfs stores zeros too; this keeps any compression honest
	}
	for freeBytes(t, filepath.Dir(path)) > leave {
		n := len(chunk)
		if free := freeBytes(t, filepath.Dir(path)); leave > 0 && free-leave < uint64(n) {
			n = int(free - leave)
		}
		if _, err := f.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) && leave == 0 {
				return
			}
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// refusedCommands is the silo's orrery_store_refused_commands_total.
func refusedCommands(t *testing.T, ctx context.Context, p *SiloProcess) float64 {
	t.Helper()
	status, body, err := httpAnswer(ctx, "http://"+p.AdminAddress()+"/metrics")
	if err != nil || status != 200 {
		t.Fatalf("/metrics: %d %v", status, err)
	}
	m := regexp.MustCompile(`(?m)^orrery_store_refused_commands_total(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no orrery_store_refused_commands_total:\n%s", grepLines(body, "orrery_store"))
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// grepLines is the lines of text that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestARealFullDiskRefusesWorkAndRecovers runs a silo on a real file system, a tmpfs, that
// another process (this test) fills. Below the free-space floor the silo refuses new commands
// (counted on /metrics) and says so on /readyz, but still drains its queues (receives and acks
// go on above half the floor); it serves again on its own once space comes back. Filled to the
// last byte, it still stops cleanly on SIGTERM (no SIGBUS in Badger's flush), and starts again
// once space is freed. Every enqueue that returned success is there afterwards, and none that
// failed.
func TestARealFullDiskRefusesWorkAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a silo process on a tmpfs")
	}
	const floor = silo.DefaultMinFreeBytes
	disk := mountTmpfs(t, int64(floor)+512<<20)
	spec := &SiloSpec{DataDir: filepath.Join(disk, "silo"), Partitions: 4}
	p := StartSilo(t, spec)
	c := dial(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "disk", Queue: "jobs", Key: uuid.NewString()}
	var stored []string
	enqueue := func(id string, within time.Duration) error {
		callCtx, cancelCall := context.WithTimeout(ctx, within)
		defer cancelCall()
		_, err := c.Enqueue(callCtx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{"n":1}`})
		if err == nil {
			stored = append(stored, id)
		}
		return err
	}
	for i := range 10 {
		if err := enqueue(fmt.Sprintf("before-%d", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	filler := filepath.Join(disk, "filler")

	// Below the floor, above half of it: new work refused, draining allowed.
	fill(t, filler, floor/2+64<<20)
	t.Logf("filled: %d MiB free, floor %d MiB", freeBytes(t, disk)>>20, floor>>20)
	testkit.Eventually(t, 10*time.Second, "/readyz to answer 503 naming the disk", func() bool {
		status, body, err := httpAnswer(ctx, "http://"+p.AdminAddress()+"/readyz")
		return err == nil && status == 503 && strings.Contains(body, "free")
	})
	if err := enqueue("refused-1", 2*time.Second); err == nil {
		t.Fatal("an enqueue below the free-space floor succeeded")
	}
	if n := refusedCommands(t, ctx, p); n < 1 {
		t.Fatalf("orrery_store_refused_commands_total %v after a refused enqueue, want at least 1", n)
	}
	partition := route.Partition(lane, c.Partitions())
	msgs, err := c.Receive(ctx, partition, &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 3}, 0)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("a receive below the floor, above half of it: %d messages, %v; want the queue drained", len(msgs), err)
	}
	for _, m := range msgs {
		if _, err := c.Ack(ctx, m.GetLane(), m.GetId(), m.GetLease().GetToken()); err != nil {
			t.Fatalf("an ack below the floor, above half of it: %v", err)
		}
		stored = slices.DeleteFunc(stored, func(id string) bool { return id == m.GetId() })
	}

	// Space back: it serves again by itself.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the silo to serve again once space came back", func() bool {
		return enqueue(fmt.Sprintf("after-%d", len(stored)), 2*time.Second) == nil
	})
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// Full to the last byte: SIGTERM stops it cleanly.
	fill(t, filler, 0)
	t.Logf("filled to the last byte: %d bytes free", freeBytes(t, disk))
	if err := enqueue("refused-2", 2*time.Second); err == nil {
		t.Fatal("an enqueue on a full disk succeeded")
	}
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM on a full disk: %v\n%s", err, p.Log())
	}
	if strings.Contains(p.Log(), "SIGBUS") || strings.Contains(p.Log(), "fatal error") {
		t.Fatalf("the silo crashed stopping on a full disk:\n%s", p.Log())
	}

	// Space freed: it starts again with everything that was stored, and nothing refused.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	p = StartSilo(t, spec)
	c = dial(t, p)
	var got []string
	after := ""
	for {
		page, next, err := c.InspectLane(ctx, lane, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page {
			got = append(got, m.GetId())
		}
		if next == "" {
			break
		}
		after = next
	}
	slices.Sort(got)
	slices.Sort(stored)
	if !slices.Equal(got, stored) {
		t.Fatalf("after the restart the lane holds %v, want exactly the enqueues that succeeded and were not acked %v", got, stored)
	}
}
