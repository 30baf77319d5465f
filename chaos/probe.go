package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// probeNamespace is the namespace of the lanes the whole-cluster probe writes to; no schedule
// ever lives there.
const probeNamespace = "chaos-probe"

// probeTimeout bounds each partition's probe command in awaitWhole.
const probeTimeout = 5 * time.Second

// probeLane is a lane of probeNamespace that routes to partition n of partitions.
func probeLane(n, partitions int) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: probeNamespace, Queue: "probe", Key: keyOn(probeNamespace, "probe", n, partitions)}
}

// probePartitions sends one command to each of partitions partitions through c and returns an
// error naming the first that does not answer it within timeout. The command is a read-write
// one that changes nothing: it cancels, under a new command id, a schedule that does not
// exist, so the partition's leader must commit and apply an entry (its replay record) before it
// answers NotFound; any other answer, or none, is the partition not serving.
func probePartitions(ctx context.Context, c *client.Client, partitions int, timeout time.Duration) error {
	for n := range partitions {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		_, err := c.CancelSchedule(callCtx, &orreryv1.CancelSchedule{Lane: probeLane(n, partitions), ScheduleId: uuid.NewString(), AnyRevision: true},
			client.WithCommandID("probe-"+uuid.NewString()))
		cancel()
		if orrery.CodeOf(err) != orrery.CodeNotFound {
			return fmt.Errorf("partition %d does not answer a command within %v: %v", n, timeout, err)
		}
	}
	return nil
}

// describeReplicas is, for a failure message, every serving silo's view of each partition's
// group (the leader it knows, its term, the voters, whether it leads) and the tail of each
// silo's log.
func describeReplicas(ctx context.Context, cl *Cluster) string {
	var b strings.Builder
	// A silo's table reads each partition's status through the cluster (5 s at most): longer
	// than Tables allows while a partition does not answer.
	tables := make([]*PartitionTable, len(cl.Silos))
	errs := make([]error, len(cl.Silos))
	var wg sync.WaitGroup
	for i, p := range cl.Silos {
		wg.Go(func() {
			readCtx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			tables[i], errs[i] = ReadPartitions(readCtx, p.AdminAddress())
		})
	}
	wg.Wait()
	for i, p := range cl.Silos {
		fmt.Fprintf(&b, "silo %d (%s):", i, p.SiloID())
		table := tables[i]
		if table == nil {
			fmt.Fprintf(&b, " no partition table (%v)\n", errs[i])
			continue
		}
		for _, row := range table.Partitions {
			r := row.Replica
			if r == nil {
				fmt.Fprintf(&b, " p%d:-", row.Partition)
				continue
			}
			leader := "none"
			if r.LeaderSilo != nil {
				leader = *r.LeaderSilo
			}
			fmt.Fprintf(&b, " p%d:{leader %s term %d voters %v leads %v}", row.Partition, leader, r.Term, r.Voters, r.Leads)
		}
		b.WriteString("\n")
	}
	for i, p := range cl.Silos {
		log := p.Log()
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		fmt.Fprintf(&b, "--- the tail of silo %d's log:\n%s\n", i, log)
	}
	return b.String()
}
