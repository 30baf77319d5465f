package replication

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

// unansweredReads is the number of Read calls the driver holds without an answer.
func (d *Driver) unansweredReads() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, readers := range d.reads.queued {
		n += len(readers)
	}
	for _, q := range d.reads.inFlight {
		n += len(q.readers)
	}
	for _, q := range d.reads.confirmed {
		n += len(q.readers)
	}
	return n
}

// heldReads is everything the driver keeps for Read calls: queued calls and requests.
func (d *Driver) heldReads() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads.count()
}

// readCall is a Read running on a goroutine of its own. applied is the replica's state as the
// goroutine saw it right after Read returned.
type readCall struct {
	done    chan struct{}
	err     error
	applied []Entry
}

func (c *readCall) answered() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// startRead calls Read on r's driver from a new goroutine and returns once the call is queued
// in the driver or has returned.
func startRead(t *testing.T, ctx context.Context, r *replica, group int) *readCall {
	t.Helper()
	before := r.driver.unansweredReads()
	call := &readCall{done: make(chan struct{})}
	go func() {
		call.err = r.driver.Read(ctx, group)
		call.applied = r.appliedOf(group)
		close(call.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !call.answered() && r.driver.unansweredReads() == before {
		if time.Now().After(deadline) {
			t.Fatal("Read neither queued nor returned")
		}
		runtime.Gosched()
	}
	return call
}

// await returns the call's answer, which the test's stepping should already have given.
func (c *readCall) await(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(30 * time.Second):
		t.Fatal("Read did not return within 30s")
		return nil
	}
}

// tickUntilAnswered ticks the cluster until r's driver holds no unanswered read, at most
// bound ticks.
func (c *cluster) tickUntilAnswered(t *testing.T, r *replica, bound int) {
	t.Helper()
	for range bound {
		if r.driver.unansweredReads() == 0 {
			return
		}
		c.tick()
	}
	if r.driver.unansweredReads() != 0 {
		t.Fatalf("replica %d: reads unanswered after %d ticks", r.id, bound)
	}
}

// expiringContext is a context whose deadline passes when the test calls expire.
type expiringContext struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiringContext() *expiringContext {
	return &expiringContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringContext) expire()                     { c.once.Do(func() { close(c.done) }) }
func (c *expiringContext) Done() <-chan struct{}       { return c.done }
func (c *expiringContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *expiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A leader answers a read only once a quorum acknowledged the heartbeat that carries it: its
// own rounds alone do not answer it, the followers' answers do.
func TestReadIsAnsweredOnceAQuorumConfirmsTheLeader(t *testing.T) {
	c := newCluster(t, 3, 1, 11)
	c.awaitLeader(0, electionBound)
	leader, p := c.propose(0, "before")
	c.settle()
	call := startRead(t, context.Background(), leader, 0)
	for {
		did, err := leader.driver.RunRound()
		if err != nil {
			t.Fatal(err)
		}
		if !did {
			break
		}
	}
	if n := leader.driver.unansweredReads(); n != 1 {
		t.Fatalf("the leader answered the read from its own rounds (%d unanswered), before any follower confirmed it", n)
	}
	c.settle()
	if n := leader.driver.unansweredReads(); n != 0 {
		t.Fatalf("%d reads unanswered after the followers confirmed", n)
	}
	if err := call.await(t); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !slices.ContainsFunc(call.applied, func(e Entry) bool { return e.Index == p.Index }) {
		t.Fatalf("the read returned before entry %d applied: state %q", p.Index, commands(call.applied))
	}
	if n := leader.driver.heldReads(); n != 0 {
		t.Fatalf("the driver still holds %d reads", n)
	}
}

// A leader cut off from the others never answers a read: a read whose deadline passes first
// fails with DeadlineExceeded, and the others fail once it steps down. Meanwhile the majority
// elects a leader whose reads see entries the old one never saw.
func TestCutOffLeaderAnswersNoReadWhileTheMajoritysLeaderDoes(t *testing.T) {
	c := newCluster(t, 3, 1, 12)
	old := c.awaitLeader(0, electionBound)
	c.propose(0, "before")
	c.settle()
	c.net.Isolate(old.id)

	ctx := newExpiringContext()
	timedOut := startRead(t, ctx, old, 0)
	c.ticks(3)
	if st, _ := old.driver.Status(0); !st.CanPropose {
		t.Fatal("the cut-off leader stepped down within 3 ticks; the test needs it leading")
	}
	if old.driver.unansweredReads() != 1 {
		t.Fatal("the cut-off leader answered a read")
	}
	ctx.expire()
	if err := timedOut.await(t); !errors.Is(err, orrery.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want DeadlineExceeded", err)
	}

	failed := startRead(t, context.Background(), old, 0)
	var leader *replica
	for i := 0; leader == nil || !failed.answered(); i++ {
		if i > 4*electionBound {
			t.Fatalf("within %d ticks: new leader %v, old leader's read answered %v", i, leader != nil, failed.answered())
		}
		c.tick()
		if l := c.leader(0); l != nil && l != old {
			leader = l
		}
	}
	if err := failed.await(t); !errors.Is(err, orrery.ErrUnavailable) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the cut-off leader's read: %v, want Unavailable (ErrNotLeader)", err)
	}
	if n := old.driver.heldReads(); n != 0 {
		t.Fatalf("the old leader still holds %d reads", n)
	}

	p, err := leader.driver.Propose(0, "tenant-a", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	c.settle()
	read := startRead(t, context.Background(), leader, 0)
	c.tickUntilAnswered(t, leader, electionBound)
	if err := read.await(t); err != nil {
		t.Fatalf("the new leader's read: %v", err)
	}
	if got := commands(read.applied); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("the new leader's read saw %q, want [before after]", got)
	}
	if read.applied[1].Index != p.Index {
		t.Fatalf("the new leader's read saw entry %d, want %d", read.applied[1].Index, p.Index)
	}
	if got := commands(old.appliedOf(0)); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("the cut-off replica applied %q, want [before]", got)
	}
	if _, err := old.driver.Propose(0, "tenant-a", []byte("stale")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the cut-off replica still leads: %v", err)
	}
}

// A read made right after a write committed is answered only once the state machine, which
// applies asynchronously, has applied the write; not when Groups handed it to Apply. The
// group has one voter, so its ReadState comes in the very round that hands the write over.
func TestReadAfterAWriteWaitsUntilTheWriteApplied(t *testing.T) {
	c := newCluster(t, 1, 1, 13)
	r := c.replica(1)
	r.deferApply = true
	c.awaitLeader(0, electionBound)
	p, err := r.driver.Propose(0, "tenant-a", []byte("write"))
	if err != nil {
		t.Fatal(err)
	}
	if did, err := r.driver.RunRound(); err != nil || !did {
		t.Fatalf("the write's round: ran %v, %v", did, err)
	}
	if st, _ := r.driver.Status(0); st.AppliedIndex >= p.Index {
		t.Fatalf("the write was handed to Apply in its own round (applied index %d); the test needs it committed but not handed over", st.AppliedIndex)
	}
	call := startRead(t, context.Background(), r, 0)
	if did, err := r.driver.RunRound(); err != nil || !did {
		t.Fatalf("the read's round: ran %v, %v", did, err)
	}
	if st, _ := r.driver.Status(0); st.AppliedIndex < p.Index {
		t.Fatalf("the read's round did not hand the write to Apply (applied index %d, write at %d)", st.AppliedIndex, p.Index)
	}
	if n := r.driver.unansweredReads(); n != 1 {
		t.Fatal("the read was answered once the write was handed to Apply, before the state machine reported it applied")
	}
	c.settle()
	if err := call.await(t); err != nil {
		t.Fatalf("read: %v", err)
	}
	if got := commands(call.applied); !slices.Equal(got, []string{"write"}) {
		t.Fatalf("the read returned with state %q, want [write]", got)
	}
	if o, ok := r.outcomeOf(p); !ok || !o.Committed {
		t.Fatalf("the write's outcome: %+v (settled %v)", o, ok)
	}
}

// A follower refuses a read at once: reads are not forwarded to the leader.
func TestReadOnAFollowerFailsWithNotLeader(t *testing.T) {
	c := newCluster(t, 3, 1, 14)
	leader := c.awaitLeader(0, electionBound)
	for _, r := range c.replicas {
		if r == leader {
			continue
		}
		call := startRead(t, context.Background(), r, 0)
		if !call.answered() {
			t.Fatalf("follower %d took the read", r.id)
		}
		if err := call.await(t); !errors.Is(err, orrery.ErrUnavailable) || !errors.Is(err, ErrNotLeader) {
			t.Fatalf("read on follower %d: %v, want Unavailable (ErrNotLeader)", r.id, err)
		}
		if n := r.driver.heldReads(); n != 0 {
			t.Fatalf("follower %d holds %d reads", r.id, n)
		}
	}
	call := startRead(t, context.Background(), c.replica(1), 7)
	if !call.answered() {
		t.Fatal("a replica took a read of a group it does not host")
	}
	if err := call.await(t); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("read of a group not hosted: %v, want ErrUnknownGroup", err)
	}
}

// A leader that has not applied an entry of its own term refuses reads (ErrNotCaughtUp), as
// it refuses proposals, instead of leaving them to Raft, which would hold them across a loss
// of leadership; once caught up it answers them.
func TestReadOnALeaderNotCaughtUpFailsUntilItIs(t *testing.T) {
	c := newCluster(t, 3, 1, 15)
	var fresh *replica
	for i := 0; fresh == nil; i++ {
		if i > electionBound {
			t.Fatalf("no leader seen before applying its term's entry within %d ticks", i)
		}
		for _, r := range c.replicas {
			r.clock.Advance(tickInterval)
			r.driver.Tick()
		}
		// One round per replica and one delivery at a time, to see a leader between its
		// election and the commit of its empty entry.
		for range 50 {
			for _, r := range c.replicas {
				if st, _ := r.driver.Status(0); st.Leader == r.id && !st.CanPropose {
					fresh = r
				}
			}
			if fresh != nil {
				break
			}
			moved := false
			for _, r := range c.replicas {
				did, err := r.driver.RunRound()
				if err != nil {
					t.Fatal(err)
				}
				moved = moved || did
			}
			if c.net.Deliver(c.receiver) == 0 && !moved {
				break
			}
		}
	}
	refused := startRead(t, context.Background(), fresh, 0)
	if !refused.answered() {
		t.Fatal("the leader not caught up took the read")
	}
	if err := refused.await(t); !errors.Is(err, orrery.ErrUnavailable) || !errors.Is(err, ErrNotCaughtUp) {
		t.Fatalf("read on a leader not caught up: %v, want Unavailable (ErrNotCaughtUp)", err)
	}
	if n := fresh.driver.heldReads(); n != 0 {
		t.Fatalf("the leader holds %d reads", n)
	}
	c.settle()
	if l := c.leader(0); l != fresh {
		t.Fatal("the fresh leader did not catch up and keep leading")
	}
	read := startRead(t, context.Background(), fresh, 0)
	c.tickUntilAnswered(t, fresh, electionBound)
	if err := read.await(t); err != nil {
		t.Fatalf("read once caught up: %v", err)
	}
}

// A started driver answers a read by itself: with a state machine that applies
// asynchronously and no round after the one that confirms the read, the end of the apply the
// read waits for wakes the loop.
func TestStartedDriverAnswersAReadByItself(t *testing.T) {
	c := newCluster(t, 1, 1, 16)
	r := c.replica(1)
	r.deferApply = true
	r.driver.Start()
	stopApplying := make(chan struct{})
	applying := make(chan struct{})
	go func() { // the state machine's own goroutine
		defer close(applying)
		for {
			select {
			case <-stopApplying:
				return
			default:
			}
			r.finishApplies()
			runtime.Gosched()
		}
	}()
	t.Cleanup(func() {
		close(stopApplying)
		<-applying
		if err := r.driver.Stop(); err != nil {
			t.Errorf("driver: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	poll := func(what string, done func() bool) {
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s", what)
			}
			runtime.Gosched()
		}
	}
	for i := 0; ; i++ {
		if st, _ := r.driver.Status(0); st.CanPropose {
			break
		}
		if i > electionBound {
			t.Fatalf("no leader within %d ticks", i)
		}
		poll("idle", r.driver.idle)
		r.clock.Advance(tickInterval)
	}
	p, err := r.driver.Propose(0, "tenant-a", []byte("write"))
	if err != nil {
		t.Fatal(err)
	}
	poll("the write's outcome", func() bool { _, ok := r.outcomeOf(p); return ok })
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := r.driver.Read(ctx, 0); err != nil {
		t.Fatalf("read: %v", err)
	}
	if got := commands(r.appliedOf(0)); !slices.Equal(got, []string{"write"}) {
		t.Fatalf("the read returned with state %q, want [write]", got)
	}
}
