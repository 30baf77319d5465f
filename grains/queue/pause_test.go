package queue

import (
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

func (b *bundle) pause(queue, reason string) *orreryv1.QueuePauseResult {
	b.t.Helper()
	res, err := ApplyPause(b.store, "operator", &orreryv1.PauseQueue{Namespace: testNamespace, Queue: queue, Reason: reason}, b.now)
	if err != nil {
		b.t.Fatalf("pause %s: %v", queue, err)
	}
	return res
}

func (b *bundle) resume(queue string) *orreryv1.QueuePauseResult {
	b.t.Helper()
	res, err := ApplyResume(b.store, &orreryv1.ResumeQueue{Namespace: testNamespace, Queue: queue})
	if err != nil {
		b.t.Fatalf("resume %s: %v", queue, err)
	}
	return res
}

// TestPausedQueueReceivesNothing: while a queue is paused its receives lease nothing and it has
// nothing visible for a waiting receive, enqueues still land, and a lease held from before the
// pause still extends and acks; a resume delivers what waited, in order.
func TestPausedQueueReceivesNothing(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	b.enqueue("b")
	held := b.receive(testQueue, 1)
	if len(held) != 1 || held[0].GetId() != "a" {
		t.Fatalf("received %v before the pause", ids(held))
	}
	res := b.pause(testQueue, "deploy")
	if !res.GetChanged() || res.GetPause().GetPausedBy() != "operator" || res.GetPause().GetPausedAtUnixMicros() != b.now || res.GetPause().GetReason() != "deploy" {
		t.Fatalf("pause: %v", res)
	}
	b.advance(input.Second)
	b.enqueue("c")
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("a paused queue delivered %v", ids(got))
	}
	if visible, err := VisibleAt(b.store, testNamespace, testQueue, b.now); err != nil || visible {
		t.Fatalf("VisibleAt of a paused queue: %v, %v", visible, err)
	}
	if _, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, b.now+input.Hour); err != nil || found {
		t.Fatalf("NextVisibleBefore of a paused queue: %v, %v", found, err)
	}
	if _, err := ApplyExtendLease(b.store, b.lim, &orreryv1.ExtendLease{Lane: held[0].GetLane(), Id: "a", LeaseToken: held[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatalf("extend a lease held through the pause: %v", err)
	}
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: held[0].GetLane(), Id: "a", LeaseToken: held[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatalf("ack a lease held through the pause: %v", err)
	}
	stats, err := Stats(b.store, testNamespace, testQueue, "", b.now)
	if err != nil || stats.GetVisible() != 2 || stats.GetPause().GetReason() != "deploy" {
		t.Fatalf("stats of the paused queue: %v, %v", stats, err)
	}
	if again := b.pause(testQueue, "other"); again.GetChanged() || again.GetPause().GetReason() != "deploy" {
		t.Fatalf("a second pause: %v, want the first pause kept", again)
	}
	if other := b.receive(deadQueue, 1); other != nil {
		t.Fatalf("dead-letter queue: %v", ids(other))
	}
	if r := b.resume(testQueue); !r.GetChanged() || r.GetPause() != nil {
		t.Fatalf("resume: %v", r)
	}
	if got := b.receive(testQueue, 10); len(got) != 2 || got[0].GetId() != "b" || got[1].GetId() != "c" {
		t.Fatalf("after the resume: %v, want [b c]", ids(got))
	}
	if r := b.resume(testQueue); r.GetChanged() {
		t.Fatalf("a second resume: %v", r)
	}
}

// TestPauseOnlyItsQueue: a pause is of one (namespace, queue): another queue of the namespace
// and the same queue name in another namespace still deliver.
func TestPauseOnlyItsQueue(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(e *orreryv1.Enqueue) { e.Lane = laneOf("other", "k") })
	b.enqueue("b", func(e *orreryv1.Enqueue) { e.Lane.Namespace = "ns2" })
	b.pause(testQueue, "")
	if got := b.receive("other", 1); len(got) != 1 {
		t.Fatalf("another queue: %v", ids(got))
	}
	res, err := ApplyReceive(b.store, b.lim, &orreryv1.Receive{Namespace: "ns2", Queue: testQueue}, b.now)
	if err != nil || len(res.GetMessages()) != 1 {
		t.Fatalf("the queue in another namespace: %v, %v", res, err)
	}
}

// TestPauseValidation: a bad namespace, queue or reason is refused naming the field.
func TestPauseValidation(t *testing.T) {
	b := setup(t)
	long := string(make([]byte, input.MaxReasonBytes+1))
	for _, c := range []struct {
		m     *orreryv1.PauseQueue
		field string
	}{
		{&orreryv1.PauseQueue{Queue: testQueue}, "namespace"},
		{&orreryv1.PauseQueue{Namespace: testNamespace, Queue: "bad queue"}, "queue"},
		{&orreryv1.PauseQueue{Namespace: testNamespace, Queue: testQueue, Reason: long}, "reason"},
	} {
		_, err := ApplyPause(b.store, "operator", c.m, b.now)
		wantCode(t, err, orrery.CodeValidation, c.field)
	}
	_, err := ApplyResume(b.store, &orreryv1.ResumeQueue{Namespace: testNamespace})
	wantCode(t, err, orrery.CodeValidation, "queue")
}
