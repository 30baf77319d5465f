package partition

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/replication"
)

// checksumTransport is the network twin's transport with the checksum reports of
// ChecksumSender delivered straight to the destination host.
type checksumTransport struct {
	replication.Transport
	rs   *replicaSet
	from uint64
}

func (c checksumTransport) SendChecksum(to uint64, group int, index uint64, sum []byte) {
	if h := c.rs.host(to); h != nil {
		h.ChecksumReported(c.from, group, index, sum)
	}
}

func (c checksumTransport) SendRepairRequest(to uint64, group int, replica uint64) {
	if h := c.rs.host(to); h != nil {
		h.RepairRequested(c.from, group, replica)
	}
}

// host is the host of silo id when it is up.
func (rs *replicaSet) host(id uint64) *Host {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hosts[id]
}

// hasDivergedKey reports whether h's state of partition n holds DivergedKey.
func hasDivergedKey(t *testing.T, h *Host, n int) bool {
	t.Helper()
	found := false
	err := h.machines[n].state.View(func(r kv.Reader) error {
		_, ok, err := r.Get(DivergedKey)
		found = ok
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// checkCommand is a CheckConsistency command as Orrery's own principal.
func checkCommand(id string) *orreryv1.CommandRequest {
	return &orreryv1.CommandRequest{Principal: input.SystemPrincipalPrefix + "test", Batch: &orreryv1.Batch{CommandId: id,
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_CheckConsistency{CheckConsistency: &orreryv1.CheckConsistency{}}}}}}
}

// waitVerdict waits until leader has concluded a check of partition n after index after.
func waitVerdict(t *testing.T, leader *Host, n int, after uint64) Verdict {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if v := leader.Consistency(n).Last; v.Index > after {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verdict on partition %d after index %d within 20 s", n, after)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTheConsistencyCheckFindsAReplicaWrittenBehindItsStateMachine: three replicas of a
// partition checked after the same commands agree (every replica's checksum at the check's
// index equal, the leader's verdict consistent); after one follower's state took a key its
// state machine never wrote, the next check names that follower, and only it, divergent, and
// the leader counts one inconsistency. The leader then rebuilds the follower from its state:
// the key is gone, the follower applies what follows like the others, and the next check finds
// every replica equal.
func TestTheConsistencyCheckFindsAReplicaWrittenBehindItsStateMachine(t *testing.T) {
	rs := newReplicaSet(t)
	for id, h := range rs.hosts {
		h.SetTransport(checksumTransport{Transport: rs.net.Transport(id), rs: rs, from: id})
	}
	leader := rs.leader(1)
	system, pid := grainOn(t, Config{Host: leader}, 1)
	grantAll(t, system, pid, "alice")
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c1", 0, enqueue("m1"))))
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, checkCommand("check-1")))

	v := waitVerdict(t, leader, 1, 0)
	if !v.Consistent() || len(v.Sums) != 3 || len(v.Missing) != 0 {
		t.Fatalf("first check: %+v, want three equal checksums", v)
	}
	for _, h := range rs.hosts {
		testkit.Eventually(t, 20*time.Second, "every replica's checksum", func() bool { return h.Consistency(1).Own.Index == v.Index })
		if own := h.Consistency(1).Own; !bytes.Equal(own.Sum, v.Majority) {
			t.Fatalf("silo %x's own checksum %x differs from the verdict's %x", h.SiloID(), own.Sum, v.Majority)
		}
	}

	var follower *Host
	for _, h := range rs.hosts {
		if h != leader {
			follower = h
			break
		}
	}
	if err := follower.Diverge(1); err != nil {
		t.Fatal(err)
	}
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c2", 0, enqueue("m2"))))
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, checkCommand("check-2")))

	v2 := waitVerdict(t, leader, 1, v.Index)
	if v2.Consistent() || !slices.Equal(v2.Divergent, []uint64{follower.SiloID()}) || v2.Majority == nil {
		t.Fatalf("after the injection: %+v, want silo %x alone divergent", v2, follower.SiloID())
	}
	if got := leader.Consistency(1).Inconsistencies; got != 1 {
		t.Fatalf("the leader counted %d inconsistencies, want 1", got)
	}
	if bytes.Equal(v2.Sums[follower.SiloID()], v2.Majority) {
		t.Fatal("the divergent replica's checksum equals the majority's")
	}

	testkit.Eventually(t, 20*time.Second, "the leader's rebuild of the divergent replica", func() bool { return leader.Consistency(1).Repairs == 1 })
	if r := leader.Consistency(1).LastRepair; r.Replica != follower.SiloID() || r.Err != nil || r.Index < v2.Index {
		t.Fatalf("last repair %+v, want silo %x installed at or after %d", r, follower.SiloID(), v2.Index)
	}
	if hasDivergedKey(t, follower, 1) {
		t.Fatal("the rebuilt replica still holds the key written behind its state machine")
	}
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c3", 0, enqueue("m3"))))
	waitMessages(t, follower, "m1", "m2", "m3")
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, checkCommand("check-3")))
	if v3 := waitVerdict(t, leader, 1, v2.Index); !v3.Consistent() || len(v3.Sums) != 3 {
		t.Fatalf("the check after the rebuild: %+v, want three equal checksums", v3)
	}
}

// TestADivergentLeaderHandsOverAndIsRebuilt: when the check finds the leader's own replica
// divergent, it hands the leadership to a replica of the majority and asks it for a rebuild;
// the old leader's state loses the key written behind its state machine, and a check by the
// new leader finds every replica equal.
func TestADivergentLeaderHandsOverAndIsRebuilt(t *testing.T) {
	rs := newReplicaSet(t)
	for id, h := range rs.hosts {
		h.SetTransport(checksumTransport{Transport: rs.net.Transport(id), rs: rs, from: id})
	}
	leader := rs.leader(1)
	system, pid := grainOn(t, Config{Host: leader}, 1)
	grantAll(t, system, pid, "alice")
	if err := leader.Diverge(1); err != nil {
		t.Fatal(err)
	}
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c1", 0, enqueue("m1"))))
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, checkCommand("check-1")))
	v := waitVerdict(t, leader, 1, 0)
	if !slices.Equal(v.Divergent, []uint64{leader.SiloID()}) || v.Majority == nil {
		t.Fatalf("verdict %+v, want the leader %x alone divergent", v, leader.SiloID())
	}
	testkit.Eventually(t, 20*time.Second, "the divergent leader's rebuild", func() bool { return !leader.Leads(1) && !hasDivergedKey(t, leader, 1) })
	var repairer *Host
	testkit.Eventually(t, 20*time.Second, "a replica of the majority counting the rebuild", func() bool {
		for _, h := range rs.hosts {
			if h != leader && h.Consistency(1).Repairs == 1 {
				repairer = h
			}
		}
		return repairer != nil
	})
	if r := repairer.Consistency(1).LastRepair; r.Replica != leader.SiloID() || r.Err != nil {
		t.Fatalf("last repair %+v, want silo %x installed", r, leader.SiloID())
	}
	next := rs.leader(1)
	system2, pid2 := grainOn(t, Config{Host: next}, 1)
	grantAll(t, system2, pid2, "alice")
	receipt(t, request[*orreryv1.CommandReply](t, system2, pid2, command("c2", 0, enqueue("m2"))))
	waitMessages(t, leader, "m1", "m2")
	receipt(t, request[*orreryv1.CommandReply](t, system2, pid2, checkCommand("check-2")))
	if v2 := waitVerdict(t, next, 1, 0); !v2.Consistent() || len(v2.Sums) != 3 {
		t.Fatalf("the new leader's check after the rebuild: %+v, want three equal checksums", v2)
	}
}

// TestReplicasApplyUnderThePartitionsLimitsNotTheirOwn: three hosts configured with three
// different payload limits (1,000, 2,000 and 3,000 bytes). Whichever leads proposes its limits
// and every replica applies under them: a 1,500-byte payload is taken or refused alike on
// every replica, the replicas hold the same messages, a consistency check finds them equal, and
// the partition's status reports the leader's limit to clients.
func TestReplicasApplyUnderThePartitionsLimitsNotTheirOwn(t *testing.T) {
	rs := newReplicaSetWith(t, func(i int, cfg *HostConfig) {
		cfg.Limits = input.DefaultLimits()
		cfg.Limits.MaxPayloadBytes = 1000 * (i + 1)
	})
	for id, h := range rs.hosts {
		h.SetTransport(checksumTransport{Transport: rs.net.Transport(id), rs: rs, from: id})
	}
	leader := rs.leader(1)
	system, pid := grainOn(t, Config{Host: leader}, 1)
	grantAll(t, system, pid, "alice")
	limit := leader.cfg.Limits.MaxPayloadBytes
	testkit.Eventually(t, 20*time.Second, "the leader's limits applied", func() bool { return leader.machines[1].Limits().MaxPayloadBytes == limit })
	payload := `"` + strings.Repeat("x", 1498) + `"`
	big := &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: "big", PayloadJson: payload}}}
	rc := receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c1", 0, big)))
	taken := rc.GetResults()[0].GetError() == nil
	if taken != (limit >= len(payload)) {
		t.Fatalf("leader's limit %d: a %d-byte payload taken %v (%v)", limit, len(payload), taken, rc.GetResults()[0].GetError())
	}
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, command("c2", 0, enqueue("m2"))))
	want := []string{"m2"}
	if taken {
		want = []string{"big", "m2"}
	}
	for _, h := range rs.hosts {
		testkit.Eventually(t, 20*time.Second, "every message on every replica", func() bool { return slices.Equal(slices.Sorted(slices.Values(laneMessages(t, h))), want) })
		if got := h.machines[1].Limits().MaxPayloadBytes; got != limit {
			t.Fatalf("silo %x (configured %d) applies under %d, want the leader's %d", h.SiloID(), h.cfg.Limits.MaxPayloadBytes, got, limit)
		}
	}
	receipt(t, request[*orreryv1.CommandReply](t, system, pid, checkCommand("check-1")))
	if v := waitVerdict(t, leader, 1, 0); !v.Consistent() || len(v.Sums) != 3 {
		t.Fatalf("check: %+v", v)
	}
	status := request[*orreryv1.InspectReply](t, system, pid, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
	if got := status.GetPartition().GetCommandLimits().GetMaxPayloadBytes(); int(got) != limit {
		t.Fatalf("status reports a payload limit of %d, want the partition's %d", got, limit)
	}
}
