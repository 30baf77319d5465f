package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FreeBytesFileEnv is the environment variable of the silo binary (cmd/silo), for testing only,
// that names a file it reads its disk's free space from while the file exists: FaultFullDisk's.
const FreeBytesFileEnv = "ORRERY_FREE_BYTES_FILE"

// fullDisk SIGKILLs a silo (most often a partition's leader), starts it again reading its free
// disk space from a file (FreeBytesFileEnv), and once it has rejoined writes 0 there: its disk
// is full for 4–10 s. The silo must refuse new work (its /readyz answers 503 within 2 s) and stay
// up; then the file is removed, and the silo must serve again on its own. It keeps running with
// the variable set, the file absent (its disk's own figure).
func (n *nemesis) fullDisk(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	held := between(n.rng, 4*time.Second, 10*time.Second)
	return n.fullDiskFor(ctx, f, i, leads, held)
}

// fullDiskFor is fullDisk with its choices made: silo i (the leader of partition leads, or -1),
// full for held.
func (n *nemesis) fullDiskFor(ctx context.Context, f *Fault, i, leads int, held time.Duration) error {
	f.Detail = fmt.Sprintf("SIGKILL %s, restart it reading its free disk space from a file, and fill its disk for %v", n.describe(f, i, leads), held.Round(time.Millisecond))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	path := filepath.Join(n.t.TempDir(), "free-bytes")
	p := n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	if err := n.restartWith(i, FreeBytesFileEnv+"="+path); err != nil {
		return err
	}
	if err := n.awaitRejoined(ctx, i); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		return err
	}
	filled := time.Now()
	refused := n.awaitNotReady(ctx, i, 2*time.Second)
	n.sleep(ctx, held-time.Since(filled))
	removeErr := os.Remove(path)
	f.Undone = time.Now().UTC()
	if p := n.cl.Silos[i]; p.Exited() {
		return fmt.Errorf("silo %d exited while its disk was full", i)
	}
	if refused != nil {
		f.Detail += "; " + refused.Error()
	} else {
		f.Detail += "; its /readyz answered 503 while full"
	}
	return errors.Join(refused, removeErr, n.awaitServes(ctx, i))
}

// awaitNotReady waits up to within for silo i's /readyz to answer other than 200.
func (n *nemesis) awaitNotReady(ctx context.Context, i int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		ok, _ := httpOK(callCtx, "http://"+n.cl.Silos[i].AdminAddress()+"/readyz")
		cancel()
		if !ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("silo %d's /readyz still answered 200 %v after its disk was full", i, within)
		}
		if !n.sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}
