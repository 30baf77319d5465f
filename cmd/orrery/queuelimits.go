package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/orreryhq/orrery/client"
)

// queueLimit caps a queue cluster-wide (client.SetQueueLimits) or, with --remove, lifts the
// cap (client.RemoveQueueLimits); a failure names the partitions not reached, and running it
// again is safe.
func (c *command) queueLimit(ctx context.Context, args []string) error {
	fs := c.flagSet("queues limit")
	maxLeased := fs.Int("max-leased", 0, "at most this many messages of the queue leased at once across the cluster (0: no cap)")
	perSecond := fs.Int("per-second", 0, "at most this many leases a second across the cluster (0: no rate limit)")
	remove := fs.Bool("remove", false, "remove the queue's limits")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("queues limit: want NAMESPACE QUEUE, got %d arguments", len(positional))
	}
	if *remove == (*maxLeased != 0 || *perSecond != 0) {
		return usagef("queues limit: want --max-leased K and/or --per-second R, or --remove")
	}
	namespace, queue := positional[0], positional[1]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if *remove {
		err = cl.RemoveQueueLimits(ctx, namespace, queue)
	} else {
		err = cl.SetQueueLimits(ctx, namespace, queue, *maxLeased, *perSecond)
	}
	if err != nil {
		return fmt.Errorf("limit queue %s/%s: %w", namespace, queue, err)
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"namespace": namespace, "queue": queue, "max_leased": *maxLeased, "per_second": *perSecond,
			"removed": *remove, "partitions": cl.Partitions()})
	}
	if *remove {
		fmt.Fprintf(c.stdout, "removed the limits of queue %s/%s on all %d partitions\n", namespace, queue, cl.Partitions())
		return nil
	}
	fmt.Fprintf(c.stdout, "limited queue %s/%s to %s on all %d partitions\n", namespace, queue, limitsText(*maxLeased, *perSecond), cl.Partitions())
	return nil
}

// limitsText renders a policy: "2 leased at once, 10 leases/s".
func limitsText(maxLeased, perSecond int) string {
	var parts []string
	if maxLeased > 0 {
		parts = append(parts, strconv.Itoa(maxLeased)+" leased at once")
	}
	if perSecond > 0 {
		parts = append(parts, strconv.Itoa(perSecond)+" leases/s")
	}
	return strings.Join(parts, ", ")
}

// limitsLine is the stats' line of a capped queue: its policy, each partition's share and the
// leases the shares count now; "" when no partition holds a share.
func limitsLine(shares []client.PartitionQueueStats) string {
	var policy string
	var each []string
	leasedNow := uint64(0)
	for _, s := range shares {
		share := s.Stats.GetShare()
		if share == nil {
			continue
		}
		policy = limitsText(int(share.GetPolicy().GetMaxLeased()), int(share.GetPolicy().GetLeasesPerSecond()))
		each = append(each, fmt.Sprintf("%d: %d leased, %g/s", s.Partition, share.GetShareLeased(), float64(share.GetShareMilliPerSecond())/1000))
		leasedNow += uint64(s.Stats.GetShareLeasedNow())
	}
	if policy == "" {
		return ""
	}
	return fmt.Sprintf("limited to %s cluster-wide; %d leased now under the shares (partition %s)", policy, leasedNow, strings.Join(each, "; "))
}
