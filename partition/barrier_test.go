package partition

import (
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/persistence"
)

// A partition whose apply does not end holds back no other partition's commands: the Raft
// driver's barrier is per group, so the other groups' rounds go on while one applies.
func TestASlowApplyHoldsBackNoOtherPartition(t *testing.T) {
	h := newHarness(t, nil)
	other, err := h.system.Root.SpawnNamed(Props(h.cfg, 2), "partition-2-beside-a-slow-apply")
	if err != nil {
		t.Fatal(err)
	}
	grantAll(t, h.system, other, "alice")

	entered, release := make(chan struct{}), make(chan struct{})
	block := func(*persistence.Txn) error {
		close(entered)
		<-release
		return nil
	}
	released := false
	t.Cleanup(func() { // before the harness's cleanups, which close the host
		if !released {
			close(release)
		}
	})
	h.cfg.Host.machines[1].tamper.Store(&block)
	slow := h.system.Root.RequestFuture(h.pid, command("slow", 0, enqueue("m-slow")), 30*time.Second)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("partition 1's apply did not start within 10 s")
	}

	l := laneOf(2, 4)
	req := command("beside", 0, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: "m-beside", PayloadJson: `{}`}}})
	res, err := h.system.Root.RequestFuture(other, req, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("partition 2's command while partition 1 applies: %v", err)
	}
	if rc := receipt(t, res.(*orreryv1.CommandReply)); !rc.GetResults()[0].GetEnqueue().GetCreated() {
		t.Fatalf("partition 2's enqueue: %v", rc)
	}

	close(release)
	released = true
	res, err = slow.Result()
	if err != nil {
		t.Fatalf("partition 1's command once its apply ended: %v", err)
	}
	if rc := receipt(t, res.(*orreryv1.CommandReply)); !rc.GetResults()[0].GetEnqueue().GetCreated() {
		t.Fatalf("partition 1's enqueue: %v", rc)
	}
}
