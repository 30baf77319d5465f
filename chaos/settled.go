package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/placement"
)

// unsettled returns an error naming the first partition of reps whose voters are not its
// target set (placement.Target) over the silos siloIDs (16 hex digits each) with replicas
// replicas, nil when every group has settled. A group whose voter count is right can still be
// on its way there: a founder outside a partition's target set leads it through four voters
// (the last target silo added, then the founder removed), and a split that catches it so, two
// voters on each side, leaves the partition without a quorum anywhere until the heal.
func unsettled(reps map[int]Replication, siloIDs []string, replicas int) error {
	ids := make([]uint64, 0, len(siloIDs))
	for _, s := range siloIDs {
		id, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			return fmt.Errorf("silo id %q: %w", s, err)
		}
		ids = append(ids, id)
	}
	for _, n := range slices.Sorted(maps.Keys(reps)) {
		var want []string
		for _, id := range placement.Target(n, ids, replicas) {
			want = append(want, cluster.FormatID(id))
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(reps[n].Voters))
		if !slices.Equal(got, want) {
			return fmt.Errorf("partition %d (led by silo %d) has voters %v, its target set is %v", n, reps[n].Leader, got, want)
		}
	}
	return nil
}
