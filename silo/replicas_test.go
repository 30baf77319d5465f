package silo

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// startFounders starts n silos with empty data dirs at the same moment, with the same seeds and
// BootstrapExpect n, and returns them once each has started. It calls mutate on each founder's
// config one founder at a time (the founders start on goroutines of their own), so a mutate
// that records the configs needs no lock.
func startFounders(t *testing.T, n, partitions int, mutate ...func(*Config)) []*Silo {
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
	var mutating sync.Mutex
	for i := range ports {
		dir := t.TempDir()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cfg := Config{DataDir: dir, Partitions: partitions, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true,
				GossipPort: ports[i], Seeds: seeds, BootstrapExpect: n}
			mutating.Lock()
			for _, m := range mutate {
				m(&cfg)
			}
			mutating.Unlock()
			s, err := Start(ctx, cfg)
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

// waitAllVoters waits until every partition's group, as each silo's replica sees it, has
// exactly the given silos as voters and no learner.
func waitAllVoters(t *testing.T, silos []*Silo, partitions int) {
	t.Helper()
	ids := make([]uint64, len(silos))
	for i, s := range silos {
		ids[i] = s.SiloID()
	}
	slices.Sort(ids)
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("every partition to have the %d silos as voters", len(silos)), func() bool {
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
}

// TestFoundersReplicateEveryPartitionAndSpreadLeadership: three founders end with every
// partition's group holding the three of them as voters, leaderships differing by at most one
// between silos, and a command to every partition answered through each silo's client.
func TestFoundersReplicateEveryPartitionAndSpreadLeadership(t *testing.T) {
	const partitions = 8
	silos := startFounders(t, 3, partitions)
	waitAllVoters(t, silos, partitions)
	testkit.Eventually(t, 60*time.Second, "leaderships to spread evenly", func() bool {
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

// TestALostSilosReplicasAreRecreatedElsewhere: four silos, three replicas per partition; one
// silo stops for good (no graceful leave); once it has been missing for DeadAfter, every
// partition's voters are three live silos, and a command to every partition is answered. The
// lost silo was retired: restarted on its data dir it stops with an error saying so, no group
// counts it again meanwhile, and started once more it refuses at once.
func TestALostSilosReplicasAreRecreatedElsewhere(t *testing.T) {
	const partitions = 8
	var cfgs []Config
	silos := startFounders(t, 4, partitions, func(c *Config) {
		c.DeadAfter = 2 * time.Second
		cfgs = append(cfgs, *c)
	})
	settled := func(live []*Silo, what string) {
		t.Helper()
		testkit.Eventually(t, 90*time.Second, what, func() bool {
			for _, s := range live {
				for n := range partitions {
					st, ok := s.host.Status(n)
					if !ok {
						return false
					}
					if st.Leader != s.SiloID() {
						continue
					}
					if len(st.Voters) != 3 || len(st.Learners) > 0 {
						return false
					}
					for _, v := range st.Voters {
						if !slices.ContainsFunc(live, func(l *Silo) bool { return l.SiloID() == v }) {
							return false
						}
					}
				}
			}
			led := 0
			for _, s := range live {
				led += len(s.Owned())
			}
			return led == partitions
		})
	}
	settled(silos, "every partition to have three voters")
	lost := silos[0]
	for _, s := range silos {
		if len(s.Owned()) > len(lost.Owned()) {
			lost = s // the busiest leader
		}
	}
	lost.shutdown(false)
	live := slices.DeleteFunc(slices.Clone(silos), func(s *Silo) bool { return s == lost })
	settled(live, "every partition to have three voters among the live silos")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n := range partitions {
		if _, err := live[0].Client().PartitionStatus(ctx, n); err != nil {
			t.Errorf("partition %d: %v", n, err)
		}
	}
	for _, s := range live {
		_, table := getJSON(t, "http://"+s.AdminAddress()+"/v1/silos")
		if got, want := fmt.Sprint(table["retired_silos"]), fmt.Sprint([]any{cluster.FormatID(lost.SiloID())}); got != want {
			t.Errorf("silo %s lists retired silos %s, want the lost silo %s", cluster.FormatID(s.SiloID()), got, want)
		}
	}

	var cfg Config
	for _, c := range cfgs {
		if c.DataDir == lost.cfg.DataDir {
			cfg = c
		}
	}
	counted := func() bool {
		for _, s := range live {
			for n := range partitions {
				if st, ok := s.host.Status(n); ok && (slices.Contains(st.Voters, lost.SiloID()) || slices.Contains(st.Learners, lost.SiloID())) {
					return true
				}
			}
		}
		return false
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStart()
	again, err := Start(startCtx, cfg)
	if err == nil {
		t.Cleanup(again.Stop)
		deadline := time.After(30 * time.Second)
	watch:
		for {
			if counted() {
				t.Fatal("a group counts the retired silo again")
			}
			select {
			case <-again.Done():
				err = again.Err()
				break watch
			case <-deadline:
				t.Fatal("the retired silo, restarted on its data dir, is still serving after 30 s")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err == nil || !strings.Contains(err.Error(), "was retired") {
		t.Fatalf("the retired silo restarted on its data dir: %v, want an error saying it was retired", err)
	}
	if counted() {
		t.Error("a group counts the retired silo again")
	}
	if _, err := Start(startCtx, cfg); err == nil || !strings.Contains(err.Error(), "was retired") {
		t.Errorf("the retired silo started once more: %v, want a refusal saying it was retired", err)
	}
}

// TestACutOffLeaderServesNothingAndHealingLosesNothing: the Raft traffic between the leader of
// a lane's partition and the other two silos is cut (the transport failpoint). The majority
// elects a new leader and goes on taking enqueues; the cut-off silo stops leading within its
// election timeout and commits nothing meanwhile. Once healed it catches up, and every enqueue
// the majority acknowledged is in the lane, once.
func TestACutOffLeaderServesNothingAndHealingLosesNothing(t *testing.T) {
	const partitions = 4
	silos := startFounders(t, 3, partitions, func(c *Config) { c.RaftFaults = &raftnet.Faults{} })
	lane := &orreryv1.Lane{Namespace: "ns", Queue: "cut", Key: "k"}
	n := route.Partition(lane, partitions)
	var cut *Silo
	testkit.Eventually(t, 60*time.Second, "partition's group to have three voters and a leader", func() bool {
		for _, s := range silos {
			if st, ok := s.host.Status(n); ok && st.CanPropose && len(st.Voters) == 3 {
				cut = s
				return true
			}
		}
		return false
	})
	var majority []*Silo
	for _, s := range silos {
		if s != cut {
			majority = append(majority, s)
			s.cfg.RaftFaults.Cut(cut.SiloID())
			cut.cfg.RaftFaults.Cut(s.SiloID())
		}
	}
	cutAt := time.Now()
	testkit.Eventually(t, 10*time.Second, "the cut-off leader to step down", func() bool { return !cut.host.Leads(n) })
	t.Logf("the cut-off leader stepped down %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	cutApplied, _ := cut.host.Status(n)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const enqueues = 20
	for i := range enqueues {
		if _, err := majority[i%2].Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: fmt.Sprint("m", i), PayloadJson: "{}"}); err != nil {
			t.Fatalf("enqueue %d through the majority: %v", i, err)
		}
	}
	if st, _ := cut.host.Status(n); st.AppliedIndex != cutApplied.AppliedIndex || st.CanPropose {
		t.Fatalf("the cut-off silo applied %d → %d (can propose %v) while cut off", cutApplied.AppliedIndex, st.AppliedIndex, st.CanPropose)
	}
	for _, s := range silos {
		s.cfg.RaftFaults.HealAll()
	}
	testkit.Eventually(t, 30*time.Second, "the healed silo to catch up", func() bool {
		lead, _ := majority[0].host.Status(n)
		st, _ := cut.host.Status(n)
		return st.AppliedIndex >= lead.AppliedIndex && st.Leader != 0
	})
	for _, s := range silos {
		msgs, _, err := s.Client().InspectLane(ctx, lane, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != enqueues {
			t.Fatalf("through silo %s the lane holds %d messages, want %d", cluster.FormatID(s.SiloID()), len(msgs), enqueues)
		}
	}
}

// TestNoElectionWhileTheCoresAreSaturated: with every core kept busy by spinning goroutines and
// a stream of enqueues, for 15 s (60 s with ORRERY_CLUSTER_FULL=1), no partition's group holds
// an election: every term stays as it was (loopback profile).
func TestNoElectionWhileTheCoresAreSaturated(t *testing.T) {
	const partitions = 8
	silos := startFounders(t, 3, partitions)
	terms := func() map[int]uint64 {
		out := map[int]uint64{}
		for _, s := range silos {
			for n := range partitions {
				if st, ok := s.host.Status(n); ok {
					out[n] = max(out[n], st.Term)
				}
			}
		}
		return out
	}
	testkit.Eventually(t, 90*time.Second, "every partition replicated and leaderships settled", func() bool {
		for _, s := range silos {
			for n := range partitions {
				if st, ok := s.host.Status(n); !ok || len(st.Voters) != 3 || st.Leader == 0 {
					return false
				}
			}
		}
		before := terms()
		time.Sleep(3 * time.Second) // leadership transfers (balancing) change terms; wait them out
		return maps.Equal(before, terms())
	})
	before := terms()
	span := 15 * time.Second
	if os.Getenv("ORRERY_CLUSTER_FULL") != "" {
		span = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for ctx.Err() == nil {
				for i := 0; i < 1_000_000; i++ {
					_ = i * i
				}
			}
		})
	}
	var enqueued atomic.Int64
	wg.Go(func() {
		c := silos[0].Client()
		for i := 0; ctx.Err() == nil; i++ {
			lane := &orreryv1.Lane{Namespace: "ns", Queue: "busy", Key: fmt.Sprint("k", i%16)}
			if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: fmt.Sprint("m", i), PayloadJson: "{}"}); err == nil {
				enqueued.Add(1)
			}
		}
	})
	wg.Wait()
	after := terms()
	for n := range partitions {
		if after[n] != before[n] {
			t.Errorf("partition %d: term %d → %d while the cores were saturated", n, before[n], after[n])
		}
	}
	t.Logf("%v with %d spinning goroutines on %d cores: %d enqueues, no term changed in %d partitions",
		span, 2*runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0), enqueued.Load(), partitions)
}

// TestASiloWhoseDiskWasLostRejoinsAsANewSilo: a silo stops, its data dir is deleted, and it
// starts again with the same flags: it joins under a new silo id, receives replicas, and the
// old id leaves every group once it has been missing for DeadAfter.
func TestASiloWhoseDiskWasLostRejoinsAsANewSilo(t *testing.T) {
	const partitions = 4
	var cfgs []Config
	silos := startFounders(t, 3, partitions, func(c *Config) {
		c.DeadAfter = 2 * time.Second
		cfgs = append(cfgs, *c)
	})
	fullyReplicated := func(live []*Silo) bool {
		ids := make([]uint64, len(live))
		for i, s := range live {
			ids[i] = s.SiloID()
		}
		slices.Sort(ids)
		for _, s := range live {
			for n := range partitions {
				if st, ok := s.host.Status(n); !ok || !slices.Equal(st.Voters, ids) || len(st.Learners) > 0 {
					return false
				}
			}
		}
		return true
	}
	testkit.Eventually(t, 60*time.Second, "three voters everywhere", func() bool { return fullyReplicated(silos) })
	lost := silos[2]
	var cfg Config
	for _, c := range cfgs {
		if c.DataDir == lost.cfg.DataDir {
			cfg = c
		}
	}
	oldID := lost.SiloID()
	lost.Stop()
	stopped := time.Now()
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := time.Now()
	reborn, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reborn.Stop)
	if reborn.SiloID() == oldID {
		t.Fatalf("the silo kept its id %s with an empty data dir", cluster.FormatID(oldID))
	}
	testkit.Eventually(t, 60*time.Second, "the new silo to hold every partition and the old id to be gone", func() bool {
		return fullyReplicated([]*Silo{silos[0], silos[1], reborn})
	})
	t.Logf("restarted on an empty data dir as %s (was %s): a voter of every partition and the old id gone %v after its start, %v after the old one's Stop returned (dead after %v; it left the membership during Stop)",
		cluster.FormatID(reborn.SiloID()), cluster.FormatID(oldID), time.Since(started).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond), cfg.DeadAfter)
}

// TestEverySiloRestartsIntoTheCluster: each of three founders in turn, the one that created the
// cluster included (its groups' logs start at a record naming it their only voter), stops and
// starts again on its data dir; each rejoins, and every partition keeps its three voters.
func TestEverySiloRestartsIntoTheCluster(t *testing.T) {
	t.Parallel()
	const partitions = 4
	var cfgs []Config
	silos := startFounders(t, 3, partitions, func(c *Config) { cfgs = append(cfgs, *c) })
	ids := make([]uint64, len(silos))
	for i, s := range silos {
		ids[i] = s.SiloID()
	}
	slices.Sort(ids)
	replicated := func() bool {
		for _, s := range silos {
			for n := range partitions {
				if st, ok := s.host.Status(n); !ok || !slices.Equal(st.Voters, ids) || st.Leader == 0 {
					return false
				}
			}
		}
		return true
	}
	testkit.Eventually(t, 60*time.Second, "three voters everywhere", replicated)
	for i, s := range silos {
		var cfg Config
		for _, c := range cfgs {
			if c.DataDir == s.cfg.DataDir {
				cfg = c
			}
		}
		s.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		again, err := Start(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("silo %s restarted: %v", cluster.FormatID(s.SiloID()), err)
		}
		t.Cleanup(again.Stop)
		silos[i] = again
		testkit.Eventually(t, 60*time.Second, fmt.Sprintf("silo %s to rejoin", cluster.FormatID(again.SiloID())), replicated)
	}
}
