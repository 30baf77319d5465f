package chaos

import (
	"slices"
	"strings"
	"testing"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/placement"
)

// TestUnsettledNamesAGroupOffItsTargetSet: a group with the right number of voters that are not
// its target set (a founder outside it, on its way out) is unsettled; one with its target set
// is not.
func TestUnsettledNamesAGroupOffItsTargetSet(t *testing.T) {
	t.Parallel()
	silos := []uint64{0x11, 0x22, 0x33, 0x44, 0x55}
	var hex []string
	for _, s := range silos {
		hex = append(hex, cluster.FormatID(s))
	}
	format := func(ids []uint64) []string {
		var out []string
		for _, id := range ids {
			out = append(out, cluster.FormatID(id))
		}
		return out
	}
	target := placement.Target(0, silos, 3)
	var outside uint64
	for _, s := range silos {
		if !slices.Contains(target, s) {
			outside = s
			break
		}
	}
	settled := map[int]Replication{0: {Leader: 0, Voters: format(target)}}
	if err := unsettled(settled, hex, 3); err != nil {
		t.Fatalf("a group of its target set: %v", err)
	}
	onItsWay := map[int]Replication{0: {Leader: 0, Voters: format([]uint64{target[0], target[1], outside})}}
	if err := unsettled(onItsWay, hex, 3); err == nil || !strings.Contains(err.Error(), "partition 0") {
		t.Fatalf("three voters, one outside the target set: %v, want partition 0 named", err)
	}
}
