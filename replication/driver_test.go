package replication

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// idle reports whether d's loop has nothing left to do until the next tick or message.
func (d *Driver) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.wake) == 0 && d.cfg.Groups.round == nil && !d.cfg.Groups.HasReady()
}

// The driver's own goroutine ticks on its clock, persists, sends, applies and advances: three
// started drivers on fake clocks elect leaders and apply the same entries. The test moves the
// clocks and the network only while every driver is idle, so no real time is involved.
func TestStartedDriversElectAndApply(t *testing.T) {
	c := newCluster(t, 3, 2, 6)
	for _, r := range c.replicas {
		r.driver.Start()
	}
	t.Cleanup(func() {
		for _, r := range c.replicas {
			if err := r.driver.Stop(); err != nil {
				t.Errorf("replica %d: %v", r.id, err)
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	awaitIdle := func() {
		for _, r := range c.replicas {
			for !r.driver.idle() {
				if time.Now().After(deadline) {
					t.Fatalf("replica %d never went idle", r.id)
				}
				select {
				case <-r.driver.Done():
					t.Fatalf("replica %d stopped: %v", r.id, r.driver.Stop())
				default:
				}
				runtime.Gosched()
			}
		}
	}
	// step moves the network until it is quiet, then every clock by one tick.
	step := func() {
		awaitIdle()
		for c.net.Deliver(c.receiver) > 0 {
			awaitIdle()
		}
		for _, r := range c.replicas {
			r.clock.Advance(tickInterval)
		}
		awaitIdle()
	}
	proposed := map[int][]string{}
	for i := 0; len(proposed[0]) < 5 || len(proposed[1]) < 5; i++ {
		if i > 10*electionBound {
			t.Fatalf("proposed %v within %d ticks", proposed, i)
		}
		step()
		for _, g := range c.groups {
			if l := c.leader(g); l != nil && len(proposed[g]) < 5 {
				cmd := fmt.Sprintf("g%d-%d", g, len(proposed[g]))
				if _, err := l.driver.Propose(g, "tenant-a", []byte(cmd)); err == nil {
					proposed[g] = append(proposed[g], cmd)
				}
			}
		}
	}
	for range 5 {
		step()
	}
	for _, g := range c.groups {
		for _, r := range c.replicas {
			if got := commands(r.appliedOf(g)); !slices.Equal(got, proposed[g]) {
				t.Fatalf("group %d replica %d applied %q, want %q", g, r.id, got, proposed[g])
			}
		}
	}
	// Every replica publishes what each group's Status says of its leadership, and reading it
	// takes no lock: requests ask on every call, while the loop holds the lock for a round.
	leaders := 0
	for _, g := range c.groups {
		for _, r := range c.replicas {
			st, _ := r.driver.Status(g)
			r.driver.mu.Lock()
			lead, ok := r.driver.Lead(g)
			r.driver.mu.Unlock()
			if want := (Lead{Leader: st.Leader, Term: st.Term, CanPropose: st.CanPropose}); !ok || lead != want {
				t.Errorf("group %d replica %d: Lead %+v (%v), want %+v as its Status says", g, r.id, lead, ok, want)
			}
			if lead.CanPropose {
				leaders++
			}
		}
	}
	if leaders != len(c.groups) {
		t.Errorf("%d replicas can propose across %d groups, want one a group", leaders, len(c.groups))
	}
	if _, ok := c.replicas[0].driver.Lead(len(c.groups) + 7); ok {
		t.Error("Lead of a group not hosted: ok")
	}
}
