package silo

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FailureProfile sets memberlist's failure detection and Raft's election timing together, for
// one kind of network. Its bounds are documented beside each profile.
type FailureProfile struct {
	// Name is the profile's flag value.
	Name string
	// ProbeInterval, ProbeTimeout, SuspicionMult and GossipInterval are memberlist's timings
	// (cluster.ProviderConfig).
	ProbeInterval, ProbeTimeout time.Duration
	SuspicionMult               int
	GossipInterval              time.Duration
	// RaftTick is the time one Raft tick stands for; ElectionTicks and HeartbeatTicks are the
	// groups' election timeout and heartbeat period in ticks (replication.Config).
	RaftTick                      time.Duration
	ElectionTicks, HeartbeatTicks int
}

// Failure profiles. For a cluster of fewer than ten silos:
//
//   - loopback: silos on one host. Raft: a leader heartbeats every 100 ms; a follower that
//     hears nothing campaigns after 0.8–1.6 s (8 ticks, randomized up to twice that), so a
//     killed or paused leader is replaced within about 1.7 s (the election itself takes a few
//     loopback round trips). Memberlist: a silo that stops answering is suspected after a
//     400 ms probe and declared dead about 1.2 s later (3 probe intervals), about 2 s in all.
//   - lan: silos on one data-center network. Raft: heartbeats every 200 ms, campaigns after
//     2–4 s (10 ticks of 200 ms, randomized up to twice that), a leader replaced within about
//     4.5 s.
//     Memberlist: memberlist's LAN defaults, probes every 1 s with a 500 ms timeout, declared
//     dead about 4 s after it was suspected, about 5.5 s in all.
//
// Raft's leadership never depends on memberlist: a leader that cannot reach a quorum steps down
// after its election timeout (CheckQuorum), and a paused one that comes back learns the new
// term from the first message it gets. Memberlist's view only decides where replicas go and
// when a missing silo's replicas are re-created (Config.DeadAfter, counted from then).
var (
	LoopbackProfile = FailureProfile{
		Name: "loopback", ProbeInterval: 400 * time.Millisecond, ProbeTimeout: 200 * time.Millisecond,
		SuspicionMult: 3, GossipInterval: 50 * time.Millisecond,
		RaftTick: 100 * time.Millisecond, ElectionTicks: 8, HeartbeatTicks: 1,
	}
	LANProfile = FailureProfile{
		Name: "lan", ProbeInterval: time.Second, ProbeTimeout: 500 * time.Millisecond,
		SuspicionMult: 4, GossipInterval: 200 * time.Millisecond,
		RaftTick: 200 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
	}
)

// FailureProfiles lists the profiles by name.
var FailureProfiles = []FailureProfile{LoopbackProfile, LANProfile}

// DefaultFailureProfile is the profile of a silo started without one.
const DefaultFailureProfile = "loopback"

// FailureProfileNamed returns the profile called name, or an error listing the known ones.
func FailureProfileNamed(name string) (FailureProfile, error) {
	i := slices.IndexFunc(FailureProfiles, func(p FailureProfile) bool { return p.Name == name })
	if i < 0 {
		names := make([]string, len(FailureProfiles))
		for j, p := range FailureProfiles {
			names[j] = p.Name
		}
		return FailureProfile{}, fmt.Errorf("failure profile: %q is not one of %s", name, strings.Join(names, ", "))
	}
	return FailureProfiles[i], nil
}
