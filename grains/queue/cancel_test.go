package queue

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

func (b *bundle) cancel(lane *orreryv1.Lane, id string) (*orreryv1.CancelMessageResult, *orreryv1.QueueMessage, error) {
	b.t.Helper()
	res, first, err := ApplyCancel(b.store, "operator", &orreryv1.CancelMessage{Lane: lane, Id: id, Reason: "wrong customer"}, b.now)
	b.check()
	return res, first, err
}

// TestCancelVisibleMessage: a visible or delayed message is removed at once with a cancelled
// tombstone, so its id is not enqueued again; a second cancel says it is done already.
func TestCancelVisibleMessage(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	b.enqueue("a")
	b.enqueue("later", func(e *orreryv1.Enqueue) { e.DelayMicros = input.Hour })
	for _, id := range []string{"a", "later"} {
		res, first, err := b.cancel(lane, id)
		if err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED || first.GetId() != id {
			t.Fatalf("cancel %s: %v %v", id, res, err)
		}
		if _, live := b.message(lane, id); live {
			t.Fatalf("%s still live", id)
		}
		if ts, found := b.tombstone(lane, id); !found || !ts.GetCancelled() || ts.GetRemovedAtUnixMicros() != b.now {
			t.Fatalf("%s tombstone %v (found %v)", id, ts, found)
		}
	}
	if messages, _ := b.counters(lane); messages != 0 {
		t.Fatalf("lane counts %d messages", messages)
	}
	if res := b.enqueue("a"); res.GetCreated() {
		t.Fatal("a cancelled id was enqueued again")
	}
	res, first, err := b.cancel(lane, "a")
	if err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE || first != nil {
		t.Fatalf("a second cancel: %v %v", res, err)
	}
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("received %v", ids(got))
	}
}

// TestCancelLeasedMessage: a leased message is marked cancelled: its ack, release and
// extension fail TokenInvalidated naming the message and the canceller, it is never delivered
// again, and the first receive after its lease ends removes it with a cancelled tombstone.
func TestCancelLeasedMessage(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	b.enqueue("a")
	got := b.receive(testQueue, 1)
	token := got[0].GetLease().GetToken()
	res, first, err := b.cancel(lane, "a")
	if err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED || first.GetCancelled().GetCancelledBy() != "operator" {
		t.Fatalf("cancel: %v %v", res, err)
	}
	_, _, err = ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: lane, Id: "a", LeaseToken: token}, b.now)
	wantCode(t, err, orrery.CodeTokenInvalidated, "lease_token")
	if !strings.Contains(err.Error(), `message "a" was cancelled by operator`) || !strings.Contains(err.Error(), "wrong customer") {
		t.Fatalf("ack error %q does not say who cancelled the message", err)
	}
	_, err = ApplyExtendLease(b.store, b.lim, &orreryv1.ExtendLease{Lane: lane, Id: "a", LeaseToken: token}, b.now)
	wantCode(t, err, orrery.CodeTokenInvalidated, "lease_token")
	_, err = ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: lane, Id: "a", LeaseToken: token}, b.now)
	wantCode(t, err, orrery.CodeTokenInvalidated, "lease_token")
	if again, first, err := b.cancel(lane, "a"); err != nil || again.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE || first != nil {
		t.Fatalf("a second cancel while leased: %v %v", again, err)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("a cancelled message was delivered again: %v", ids(got))
	}
	if _, live := b.message(lane, "a"); live {
		t.Fatal("the cancelled message outlived its lease")
	}
	if ts, found := b.tombstone(lane, "a"); !found || !ts.GetCancelled() {
		t.Fatalf("tombstone %v (found %v)", ts, found)
	}
}

// TestCancelAfterTheLeaseEnded: a cancelled message whose lease has ended is removed by the
// next cancel, and a message whose lease ended uncancelled is removed at once.
func TestCancelAfterTheLeaseEnded(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	b.enqueue("a")
	b.enqueue("b")
	b.receive(testQueue, 2)
	b.cancel(lane, "a")
	b.advance(b.lim.DefaultLeaseMicros)
	if res, _, err := b.cancel(lane, "a"); err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_ALREADY_DONE {
		t.Fatalf("cancel again after the lease: %v %v", res, err)
	}
	if _, live := b.message(lane, "a"); live {
		t.Fatal("a is live")
	}
	if res, _, err := b.cancel(lane, "b"); err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_REMOVED {
		t.Fatalf("cancel of b, its lease ended: %v %v", res, err)
	}
}

// TestCancelUnknownAndInvalid: an id with no message and no tombstone is NotFound ("id"); bad
// input is refused naming the field.
func TestCancelUnknownAndInvalid(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	_, _, err := b.cancel(lane, "nope")
	wantCode(t, err, orrery.CodeNotFound, "id")
	for _, c := range []struct {
		m     *orreryv1.CancelMessage
		field string
	}{
		{&orreryv1.CancelMessage{Id: "a"}, "lane"},
		{&orreryv1.CancelMessage{Lane: &orreryv1.Lane{Namespace: testNamespace, Queue: testQueue}, Id: "a"}, "lane.key"},
		{&orreryv1.CancelMessage{Lane: lane}, "id"},
		{&orreryv1.CancelMessage{Lane: lane, Id: "a", Reason: "a\nb"}, "reason"},
	} {
		_, _, err := ApplyCancel(b.store, "operator", c.m, b.now)
		wantCode(t, err, orrery.CodeValidation, c.field)
	}
}

// TestRedriveRemovesACancelledDeadLetter: a dead letter cancelled while leased is not moved
// back by a redrive once its lease ends: it is removed with a cancelled tombstone.
func TestRedriveRemovesACancelledDeadLetter(t *testing.T) {
	b := setup(t)
	live := laneOf(testQueue, "k")
	dead := DeadLetterLane(live)
	b.enqueue("a", func(e *orreryv1.Enqueue) { e.MaxDeliveries = 1 })
	b.receive(testQueue, 1)
	b.advance(b.lim.DefaultLeaseMicros)
	b.receive(testQueue, 1) // dead-letters a
	b.receive(deadQueue, 1)
	if res, _, err := b.cancel(dead, "a"); err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED {
		t.Fatalf("cancel of the leased dead letter: %v %v", res, err)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	res, err := ApplyRedrive(b.store, b.lim, &orreryv1.RedriveDeadLetters{Lane: live}, b.now)
	if err != nil || len(res.GetRedrivenIds()) != 0 {
		t.Fatalf("redrive: %v %v", res, err)
	}
	b.check()
	if _, found := b.message(live, "a"); found {
		t.Fatal("the cancelled dead letter was moved back")
	}
	if ts, found := b.tombstone(dead, "a"); !found || !ts.GetCancelled() {
		t.Fatalf("dead-letter tombstone %v (found %v)", ts, found)
	}
}
