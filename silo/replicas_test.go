package silo

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/orreryhq/orrery/cluster"
)

// startFounders starts n silos with empty data dirs at the same moment, with the same seeds and
// BootstrapExpect n, and returns them once each has started.
func startFounders(t *testing.T, n, partitions int) []*Silo {
	t.Helper()
	var seeds []string
	ports := make([]int, n)
	for i := range ports {
		ports[i] = gossipPort(t)
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	type started struct {
		s   *Silo
		err error
	}
	results := make(chan started, n)
	for i := range ports {
		dir := t.TempDir()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Start(ctx, Config{DataDir: dir, Partitions: partitions, Admin: "127.0.0.1:0", Logger: quiet,
				GossipPort: ports[i], Seeds: seeds, BootstrapExpect: n})
			results <- started{s, err}
		}()
	}
	var silos []*Silo
	for range ports {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
			continue
		}
		t.Cleanup(r.s.Stop)
		silos = append(silos, r.s)
	}
	if t.Failed() {
		t.FailNow()
	}
	return silos
}

// TestFoundersReplicateEveryPartitionAndSpreadLeadership: three founders end with every
// partition's group holding the three of them as voters, leaderships differing by at most one
// between silos, and a command to every partition answered through each silo's client.
func TestFoundersReplicateEveryPartitionAndSpreadLeadership(t *testing.T) {
	const partitions = 8
	silos := startFounders(t, 3, partitions)
	ids := make([]uint64, len(silos))
	for i, s := range silos {
		ids[i] = s.SiloID()
	}
	slices.Sort(ids)
	eventually(t, "every partition to have the three silos as voters", 60*time.Second, func() bool {
		for _, s := range silos {
			for n := range partitions {
				st, ok := s.host.Status(n)
				if !ok || !slices.Equal(st.Voters, ids) || len(st.Learners) > 0 {
					return false
				}
			}
		}
		return true
	})
	eventually(t, "leaderships to spread evenly", 60*time.Second, func() bool {
		led := map[uint64]int{}
		for _, s := range silos {
			led[s.SiloID()] = len(s.Owned())
		}
		total, lo, hi := 0, partitions, 0
		for _, c := range led {
			total += c
			lo, hi = min(lo, c), max(hi, c)
		}
		return total == partitions && hi-lo <= 1
	})
	for _, s := range silos {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for n := range partitions {
			if _, err := s.Client().PartitionStatus(ctx, n); err != nil {
				t.Errorf("silo %s: partition %d: %v", cluster.FormatID(s.SiloID()), n, err)
			}
		}
		cancel()
	}
}
