package chaos

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
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
			case len(c.Divergent) > 0 || !c.Consistent && len(c.Missing) == 0:
				// As the run's checker judges (run.go): a check whose missing replicas leave no
				// majority did not conclude, and is tried again below.
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
// divergent on that partition; the leader that concluded it logs the inconsistency at ERROR
// and counts it on /metrics. The diverged replica is then
// rebuilt from the majority's state: a silo counts the repair on /metrics and logs it, and the
// next check finds every partition's replicas equal, the other partitions' included.
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
	// Checks until one names the diverged replica (a leadership moving under a partition, as
	// the restarted silo takes some back, leaves that partition without a verdict; the repair
	// follows the first verdict that names it, so later checks find it consistent again). When
	// the diverged replica itself leads the partition at the check, it concludes that it
	// diverged, hands the leadership over and is rebuilt, and the checker then reads the new
	// leader's verdict, after the rebuild: consistent. The verdict it reached is in its log.
	var divergent []string
	testkit.Eventually(t, 90*time.Second, "a check naming the diverged replica", func() bool {
		table, err := CheckPartitions(ctx, cl.Silos[0].AdminAddress())
		if err != nil {
			t.Fatalf("consistency check: %v", err)
		}
		for _, p := range table.Partitions {
			if c := p.Check; p.Partition == partition && c != nil && len(c.Divergent) > 0 {
				if c.Consistent {
					t.Fatalf("partition %d: consistent with divergent replicas %v", partition, c.Divergent)
				}
				divergent = c.Divergent
			}
		}
		if divergent == nil {
			if divergent = loggedDivergent(cl.Silos, partition); divergent != nil {
				t.Logf("partition %d: the verdict naming %v read from the log of the leader that reached it", partition, divergent)
			}
		}
		return divergent != nil
	})
	if !slices.Equal(divergent, []string{divergedID}) {
		t.Fatalf("partition %d: divergent %v; want silo %s alone", partition, divergent, divergedID)
	}
	// The leader that concluded counts it and logs it; the leadership may have moved since (the
	// restarted silo takes leaderships back), so every silo is looked at.
	counter := -1
	for i, s := range cl.Silos {
		count, _, err := ReadMetric(ctx, s.AdminAddress(), "orrery_replica_inconsistencies_total", map[string]string{"partition": fmt.Sprint(partition)})
		if err == nil && count >= 1 {
			counter = i
		}
	}
	if counter < 0 {
		t.Fatalf("no silo counts an inconsistency of partition %d", partition)
	}
	// As the chaos run reads it (loggedInconsistencies): the line names the partition and the
	// divergent replica.
	logged := loggedInconsistencies([]*SiloProcess{cl.Silos[counter]})
	if len(logged) == 0 || !strings.HasPrefix(logged[0], fmt.Sprintf("partition %d at index ", partition)) || !strings.Contains(logged[0], "replica "+divergedID+" diverged") {
		t.Fatalf("silo %d counts an inconsistency of partition %d, read from its log as %q:\n%s", counter, partition, logged, cl.Silos[counter].Log())
	}
	t.Logf("partition %d: silo %s divergent, found by silo %d's check and counted by the leader that concluded it, silo %d", partition, divergedID, 0, counter)

	repairer := -1
	testkit.Eventually(t, 60*time.Second, "a silo counting the diverged replica's rebuild", func() bool {
		for i, s := range cl.Silos {
			if i == diverged {
				continue
			}
			n, _, err := ReadMetric(ctx, s.AdminAddress(), "orrery_replica_repairs_total", map[string]string{"partition": fmt.Sprint(partition)})
			if err == nil && n >= 1 {
				repairer = i
				return true
			}
		}
		return false
	})
	if log := cl.Silos[repairer].Log(); !strings.Contains(log, "divergent replica rebuilt") {
		t.Fatalf("silo %d counted a repair but did not log it:\n%s", repairer, log)
	}
	requireConsistent(t, ctx, cl)
	t.Logf("partition %d: silo %s rebuilt from silo %d's state; every partition consistent again", partition, divergedID, repairer)
}

// loggedDivergent returns the replicas the silos' logs name divergent at partition, in any
// verdict (nil when none does).
func loggedDivergent(silos []*SiloProcess, partition int) []string {
	var out []string
	prefix := fmt.Sprintf("partition %d at index ", partition)
	for _, line := range loggedInconsistencies(silos) {
		if m := loggedReplica.FindStringSubmatch(line); m != nil && strings.HasPrefix(line, prefix) && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// loggedReplica finds the replica a loggedInconsistencies line names.
var loggedReplica = regexp.MustCompile(`: replica (\S+) diverged`)
