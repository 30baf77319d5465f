package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// split cuts the cluster in two for 4–10 s (Split): a minority of the silos, one of them most
// often a partition's leader, on one side, the others on the other; the silos of each side
// still reach each other, and the workload's client reaches them all. Then it heals the split
// and waits until every silo serves.
func (n *nemesis) split(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	minority := (len(n.cl.Silos) - 1) / 2
	others := slices.DeleteFunc(n.rng.Perm(len(n.cl.Silos)), func(j int) bool { return j == i })
	sideA := append([]int{i}, others[:minority-1]...)
	sideB := others[minority-1:]
	slices.Sort(sideA)
	slices.Sort(sideB)
	held := between(n.rng, 4*time.Second, 10*time.Second)
	f.Detail = fmt.Sprintf("split silos %v (with %s) from silos %v for %v", sideA, n.describe(f, i, leads), sideB, held.Round(time.Millisecond))
	f.Silo, f.SiloID = -1, ""
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	procs := func(side []int) []*SiloProcess {
		var out []*SiloProcess
		for _, j := range side {
			out = append(out, n.cl.Silos[j])
		}
		return out
	}
	s, err := Split(procs(sideA), procs(sideB))
	if err != nil {
		return err
	}
	n.cut = s
	n.sleep(ctx, held)
	n.cut = nil
	if err := s.Heal(); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	for _, j := range sideA {
		if err := n.awaitServes(ctx, j); err != nil {
			return err
		}
	}
	return nil
}
