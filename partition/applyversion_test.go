package partition

import (
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// peersKnow is a Config.SiloApplyVersions under which every other host of rs announces
// version.
func peersKnow(rs *replicaSet, version uint32) func() map[uint64]uint32 {
	return func() map[uint64]uint32 {
		out := map[uint64]uint32{}
		for _, id := range rs.ids {
			out[id] = version
		}
		return out
	}
}

// TestEveryReplicaTakesTheRaisedApplyVersion: when every voter knows apply version 2, the
// leader's grain raises its partition to 2 and every replica's state machine applies under 2
// from that entry on; a partition whose leader has no grain stays at 1.
func TestEveryReplicaTakesTheRaisedApplyVersion(t *testing.T) {
	rs := newReplicaSetWith(t, func(_ int, cfg *HostConfig) { cfg.KnownApplyVersion = 2 })
	leader := rs.leader(1)
	grainOn(t, Config{Host: leader, SiloApplyVersions: peersKnow(rs, 2)}, 1)
	for _, h := range rs.hosts {
		testkit.Eventually(t, 20*time.Second, "every replica at apply version 2", func() bool { return h.machines[1].ApplyVersion() == 2 })
		if got := h.machines[2].ApplyVersion(); got != 1 {
			t.Fatalf("partition 2, which no grain raised, applies under %d", got)
		}
	}
}

// TestAReplicaOfAnOlderBinaryStopsInsteadOfDiverging: a replica whose binary knows only
// version 1, behind a leader told (wrongly) that every voter knows 2, fails its host at the
// SetApplyVersion entry, naming the versions, instead of applying the partition's entries
// otherwise than the others; the other replicas take version 2.
func TestAReplicaOfAnOlderBinaryStopsInsteadOfDiverging(t *testing.T) {
	var oldID uint64
	rs := newReplicaSetWith(t, func(i int, cfg *HostConfig) {
		cfg.KnownApplyVersion = 2
		if i == 2 {
			cfg.KnownApplyVersion = 1
		}
	})
	oldID = rs.ids[2]
	n := -1
	for p := range 4 {
		if rs.leader(p).SiloID() != oldID {
			n = p
			break
		}
	}
	if n < 0 {
		t.Skip("the older host leads every partition")
	}
	leader := rs.leader(n)
	grainOn(t, Config{Host: leader, SiloApplyVersions: peersKnow(rs, 2)}, n)
	old := rs.hosts[oldID]
	select {
	case <-old.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("the replica of the older binary did not stop")
	}
	if err := old.Err(); err == nil || !strings.Contains(err.Error(), "knows versions up to 1") {
		t.Fatalf("the older replica failed with %v, want the versions named", err)
	}
	for id, h := range rs.hosts {
		if id != oldID {
			testkit.Eventually(t, 20*time.Second, "the newer replicas at apply version 2", func() bool { return h.machines[n].ApplyVersion() == 2 })
		}
	}
}
