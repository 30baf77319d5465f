package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// downFault is a fault that takes one silo out of service until undone: its start and its
// undoing.
type downFault struct {
	kind  FaultKind
	what  string
	start func(i int) error
	stop  func(i int) error
}

// downFaults are the faults combined takes silos down with: SIGKILL (undone by a restart),
// SIGSTOP (by SIGCONT) and, where the silos are isolatable, a network isolation (by healing).
func (n *nemesis) downFaults() []downFault {
	faults := []downFault{
		{FaultKill, "SIGKILL", func(i int) error {
			n.expectExit(n.cl.Silos[i])
			n.cl.Silos[i].Kill()
			return nil
		}, n.restart},
		{FaultPause, "SIGSTOP", func(i int) error { return n.cl.Silos[i].Pause() }, func(i int) error { return n.cl.Silos[i].Resume() }},
	}
	if n.cl.Specs[0].Isolatable {
		faults = append(faults, downFault{FaultIsolate, "isolate", func(i int) error { return n.cl.Silos[i].Isolate() },
			func(i int) error { return n.cl.Silos[i].Heal() }})
	}
	return faults
}

// combined injects two faults at once on two silos, never more than a minority of the silos
// down: one silo (most often a partition's leader) is killed, paused or isolated for 4–10 s,
// and meanwhile, in a cluster of five or more, a second silo too (two of five down); in a
// smaller cluster, where a second silo down would be a majority, a second silo runs on a
// clock up to ±10 min off (restarted with it before, and on the real clock after). Each part
// counts under its own kind too.
func (n *nemesis) combined(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	others := slices.DeleteFunc(n.rng.Perm(len(n.cl.Silos)), func(j int) bool { return j == i })
	j := others[0]
	downs := n.downFaults()
	first := downs[n.rng.IntN(len(downs))]
	held := between(n.rng, 4*time.Second, 10*time.Second)
	target := n.describe(f, i, leads)
	if len(n.cl.Silos) < 5 {
		offset := between(n.rng, 30*time.Second, maxClockSkew).Round(time.Second)
		if n.rng.IntN(2) == 0 {
			offset = -offset
		}
		f.Detail = fmt.Sprintf("%s %s for %v while silo %d runs on a clock %s", first.what, target, held.Round(time.Millisecond), j, signed(offset))
		f.Silo, f.SiloID = -1, ""
		f.Parts = []FaultKind{first.kind, FaultSkew}
		n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
		return n.withSkew(ctx, j, offset, false, func() error { return n.holdDown(ctx, []int{i}, []downFault{first}, held) })
	}
	second := downs[n.rng.IntN(len(downs))]
	f.Detail = fmt.Sprintf("%s %s and %s silo %d (%s) at once for %v", first.what, target, second.what, j, n.cl.Silos[j].SiloID(), held.Round(time.Millisecond))
	f.Silo, f.SiloID = -1, ""
	f.Parts = []FaultKind{first.kind, second.kind}
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	err := n.holdDown(ctx, []int{i, j}, []downFault{first, second}, held)
	f.Undone = time.Now().UTC()
	return err
}

// holdDown starts each fault on its silo, holds them all for held, undoes them all, and waits
// until each silo serves again.
func (n *nemesis) holdDown(ctx context.Context, silos []int, faults []downFault, held time.Duration) error {
	var errs []string
	started := 0
	for k, i := range silos {
		if err := faults[k].start(i); err != nil {
			errs = append(errs, fmt.Sprintf("%s silo %d: %v", faults[k].what, i, err))
			break
		}
		started++
	}
	n.sleep(ctx, held)
	for k := range started {
		if err := faults[k].stop(silos[k]); err != nil {
			errs = append(errs, fmt.Sprintf("undo %s of silo %d: %v", faults[k].what, silos[k], err))
		}
	}
	for _, i := range silos[:started] {
		if err := n.awaitServes(ctx, i); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
