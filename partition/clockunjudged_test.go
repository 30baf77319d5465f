package partition

import (
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// TestAHostOpenedClockUnjudgedWinsNoElectionAtOnce: a host opened with ClockUnjudged (a silo
// restarted before it has measured its peers' clocks, perhaps on a skewed one) wins no
// election its peers could win from the moment its groups open: here it is the only replica
// that campaigns (its peers' election timeouts are far longer), and its peers grant its
// pre-votes, yet it leads nothing for the unjudged replica's three election timeouts; only
// then, the groups leaderless that long, does it take them.
func TestAHostOpenedClockUnjudgedWinsNoElectionAtOnce(t *testing.T) {
	const electionTicks = 10 // 1 s at the default 100 ms tick
	rs := newReplicaSetWith(t, func(i int, cfg *HostConfig) {
		if i == 0 {
			cfg.ElectionTicks, cfg.ClockUnjudged = electionTicks, true
		} else {
			cfg.ElectionTicks = 1000 // never campaigns within the test
		}
	})
	unjudged := rs.host(rs.ids[0])
	// Ticks are never early: three election timeouts of ticks take at least 3 s.
	leadsNothingThenAll(t, unjudged, "before its groups were leaderless for three election timeouts")
}

// leadsNothingThenAll fails the test if h leads any of its 4 partitions within 2.9 s (saying
// why it should not), then waits until it leads them all.
func leadsNothingThenAll(t *testing.T, h *Host, why string) {
	t.Helper()
	for deadline := time.Now().Add(2900 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for n := range 4 {
			if h.Leads(n) {
				t.Fatalf("the unjudged host leads partition %d %s", n, why)
			}
		}
	}
	testkit.Eventually(t, 30*time.Second, "the unjudged host to take the groups nobody else leads", func() bool {
		for n := range 4 {
			if !h.Leads(n) {
				return false
			}
		}
		return true
	})
}

// TestAnUnjudgedHostCountsLeaderlessTimeOnlyOnceItCanHearItsPeers: the time a host opened
// clock-unjudged spends without a transport (its silo joining the cluster) does not count
// toward the three leaderless election timeouts after which it may take its groups: given
// its transport after 3.5 s alone, it still leads nothing for 2.9 s.
func TestAnUnjudgedHostCountsLeaderlessTimeOnlyOnceItCanHearItsPeers(t *testing.T) {
	const electionTicks = 10 // 1 s at the default 100 ms tick
	rs := newReplicaSetWith(t, func(i int, cfg *HostConfig) {
		if i == 0 {
			cfg.ElectionTicks, cfg.ClockUnjudged = electionTicks, true
		} else {
			cfg.ElectionTicks = 1000 // never campaigns within the test
		}
	})
	unjudged := rs.host(rs.ids[0])
	unjudged.SetTransport(nil)
	time.Sleep(3500 * time.Millisecond) // joining: more than three election timeouts
	unjudged.SetTransport(rs.net.Transport(rs.ids[0]))
	leadsNothingThenAll(t, unjudged, "before its groups were leaderless for three election timeouts with a transport")
}
