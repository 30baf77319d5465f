package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// requireConsistent runs a consistency check of every partition through a serving silo
// (POST /v1/partitions/check) and fails the test unless every partition's leader found its
// replicas' checksums equal, all of them reporting. A check that could not conclude (a leader
// changed under it) is run again, up to three times in all.
func requireConsistent(t *testing.T, ctx context.Context, cl *Cluster) {
	t.Helper()
	var problems []string
	for attempt := 0; attempt < 3; attempt++ {
		serving := cl.Serving()
		if len(serving) == 0 {
			t.Fatal("no serving silo to run the consistency check")
		}
		table, err := CheckPartitions(ctx, cl.Silos[serving[0]].AdminAddress())
		if err != nil {
			t.Fatalf("consistency check: %v", err)
		}
		retry := false
		problems = problems[:0]
		for _, p := range table.Partitions {
			switch c := p.Check; {
			case p.Error != nil:
				problems, retry = append(problems, fmt.Sprintf("partition %d: %s", p.Partition, *p.Error)), true
			case len(c.Divergent) > 0 || !c.Consistent:
				problems = append(problems, fmt.Sprintf("partition %d at index %d: divergent %v, missing %v, checksums %v", p.Partition, c.Index, c.Divergent, c.Missing, c.Checksums))
			case len(c.Missing) > 0:
				problems, retry = append(problems, fmt.Sprintf("partition %d at index %d: no checksum from %v", p.Partition, c.Index, c.Missing)), true
			}
		}
		if len(problems) == 0 {
			t.Logf("consistency check: every partition's replicas hold the same state")
			return
		}
		if !retry {
			t.Fatalf("replica inconsistency:\n%s", strings.Join(problems, "\n"))
		}
	}
	t.Fatalf("consistency check did not conclude:\n%s", strings.Join(problems, "\n"))
}

// TestClusterConsistencyCheckFindsADivergedReplica: three silos; one is restarted with
// ORRERY_DIVERGE naming a partition, so its replica of it takes a key no state machine writes.
// A consistency check through another silo's admin endpoint names that silo, and only it,
// divergent on that partition, and every other partition consistent; the partition's leader
// logs the inconsistency at ERROR and counts it on /metrics.
func TestClusterConsistencyCheckFindsADivergedReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := startReplicated(t, ctx, 3, clusterSpec())
	requireConsistent(t, ctx, cl)
	const diverged, partition = 2, 5
	cl.Specs[diverged].Env = append(cl.Specs[diverged].Env, fmt.Sprintf("ORRERY_DIVERGE=%d", partition))
	cl.Silos[diverged].Kill()
	cl.Restart(t, diverged)
	waitRejoined(t, ctx, cl, diverged)
	waitReplicated(t, ctx, cl, 3, 90*time.Second)

	divergedID := cl.Silos[diverged].SiloID()
	var table *CheckTable
	// A check of every partition that concluded everywhere (a leadership moving under one, as
	// the restarted silo takes some back, leaves it without a verdict: checked again).
	waitFor(t, "a complete check naming the diverged replica", 90*time.Second, func() bool {
		var err error
		table, err = CheckPartitions(ctx, cl.Silos[0].AdminAddress())
		if err != nil {
			t.Fatalf("consistency check: %v", err)
		}
		for _, p := range table.Partitions {
			if p.Check == nil || len(p.Check.Missing) > 0 {
				return false
			}
		}
		return len(table.Partitions[partition].Check.Divergent) > 0
	})
	for _, p := range table.Partitions {
		c := p.Check
		if p.Partition == partition {
			if c.Consistent || !slices.Equal(c.Divergent, []string{divergedID}) {
				t.Fatalf("partition %d: consistent %v, divergent %v; want silo %s alone divergent", partition, c.Consistent, c.Divergent, divergedID)
			}
			continue
		}
		if !c.Consistent {
			t.Errorf("partition %d: %+v, want consistent", p.Partition, c)
		}
	}
	leader, err := cl.LeaderOf(ctx, partition)
	if err != nil {
		t.Fatal(err)
	}
	count, _, err := ReadMetric(ctx, cl.Silos[leader].AdminAddress(), "orrery_replica_inconsistencies_total", map[string]string{"partition": fmt.Sprint(partition)})
	if err != nil || count < 1 {
		t.Fatalf("partition %d's leader (silo %d) counts %v inconsistencies (%v)", partition, leader, count, err)
	}
	if log := cl.Silos[leader].Log(); !strings.Contains(log, "replica inconsistency") {
		t.Fatalf("partition %d's leader (silo %d) logged no inconsistency:\n%s", partition, leader, log)
	}
	t.Logf("partition %d: silo %s divergent, found by silo %d's check and counted by its leader, silo %d", partition, divergedID, 0, leader)
}
