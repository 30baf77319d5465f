package queue

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

const (
	dropOnExhausted       = orreryv1.RetryExhausted_RETRY_EXHAUSTED_DROP
	deadLetterOnExhausted = orreryv1.RetryExhausted_RETRY_EXHAUSTED_DEAD_LETTER
)

// setRetry sets (or, with nil, removes) queue's retry policy and requires success.
func (b *bundle) setRetry(queue string, p *orreryv1.RetryPolicy) *orreryv1.QueueRetryPolicyResult {
	b.t.Helper()
	res, err := ApplySetRetryPolicy(b.store, b.lim, "operator", &orreryv1.SetQueueRetryPolicy{Namespace: testNamespace, Queue: queue, Policy: p}, b.now)
	if err != nil {
		b.t.Fatalf("set retry policy of %s: %v", queue, err)
	}
	return res
}

// fail releases a leased message as a failed attempt with backoff and requires success,
// noting what left the lane in exhausted.
func (b *bundle) fail(msg *orreryv1.QueueMessage, errText string, handler *orreryv1.RetryPolicy, exhausted *[]Exhaustion) {
	b.t.Helper()
	_, err := ApplyReleaseNoting(b.store, b.lim, &orreryv1.Release{Lane: msg.GetLane(), Id: msg.GetId(), LeaseToken: msg.GetLease().GetToken(),
		Error: errText, Backoff: true, Retry: handler}, b.now, func(_ *orreryv1.QueueMessage, how Exhaustion) error {
		*exhausted = append(*exhausted, how)
		return nil
	})
	if err != nil {
		b.t.Fatalf("failed release of %s: %v", msg.GetId(), err)
	}
	b.check()
}

// TestRetryBackoffDoublesUpToItsCap: the n-th failure's backoff is initial × 2^(n−1) until it
// reaches the cap, which holds from then on, even for attempts whose doubling would overflow.
func TestRetryBackoffDoublesUpToItsCap(t *testing.T) {
	p := &orreryv1.RetryPolicy{InitialBackoffMicros: input.Second, MaxBackoffMicros: 10 * input.Second}
	for attempt, want := range map[uint32]int64{1: input.Second, 2: 2 * input.Second, 3: 4 * input.Second, 4: 8 * input.Second, 5: 10 * input.Second, 6: 10 * input.Second, 1000: 10 * input.Second} {
		if got := RetryBackoff(p, attempt); got != want {
			t.Fatalf("backoff of attempt %d: %s, want %s", attempt, input.FormatDuration(got), input.FormatDuration(want))
		}
	}
	huge := &orreryv1.RetryPolicy{InitialBackoffMicros: 3, MaxBackoffMicros: 365 * input.Day}
	if got := RetryBackoff(huge, 1000); got != 365*input.Day {
		t.Fatalf("backoff of attempt 1000 under a 365-day cap: %d", got)
	}
	if got := RetryBackoff(&orreryv1.RetryPolicy{}, 7); got != 0 {
		t.Fatalf("a zero policy backs off %d", got)
	}
	if got := RetryBackoff(&orreryv1.RetryPolicy{InitialBackoffMicros: 5, MaxBackoffMicros: 5}, 0); got != 5 {
		t.Fatalf("attempt 0 backs off %d, want the initial backoff", got)
	}
}

// TestRetryDelayJitterIsBoundedAndDeterministic: a jittered delay lies within jitter_percent
// below the backoff, is the same for the same message and attempt (every replica computes it
// alike), and differs between messages; without jitter it is the backoff.
func TestRetryDelayJitterIsBoundedAndDeterministic(t *testing.T) {
	lane := laneOf(testQueue, "k")
	for _, jitter := range []uint32{0, 1, 25, 100} {
		p := &orreryv1.RetryPolicy{InitialBackoffMicros: 2 * input.Second, MaxBackoffMicros: input.Minute, JitterPercent: jitter}
		seen := map[int64]bool{}
		for i := range 200 {
			attempt := uint32(1 + i%6)
			backoff := RetryBackoff(p, attempt)
			delay := RetryDelay(p, lane, idOf(i), attempt)
			if lowest := backoff - backoff*int64(jitter)/100; delay < lowest || delay > backoff {
				t.Fatalf("jitter %d%%, attempt %d: delay %d outside [%d, %d]", jitter, attempt, delay, lowest, backoff)
			}
			if again := RetryDelay(p, laneOf(testQueue, "k"), idOf(i), attempt); again != delay {
				t.Fatalf("the same message and attempt gave %d, then %d", delay, again)
			}
			seen[delay] = true
		}
		if jitter == 0 && len(seen) != 6 {
			t.Fatalf("without jitter: %d distinct delays over 6 attempts", len(seen))
		}
		if jitter >= 25 && len(seen) < 100 {
			t.Fatalf("jitter %d%%: only %d distinct delays over 200 messages", jitter, len(seen))
		}
	}
}

// TestAFailedReleaseBacksOffByThePolicy: a message whose handler fails is visible again only
// after the policy's delay for that attempt (backoff doubling, from the logged time), and keeps
// the error, the failure's time and its attempt count, which the next delivery shows.
func TestAFailedReleaseBacksOffByThePolicy(t *testing.T) {
	b := setup(t)
	policy := &orreryv1.RetryPolicy{MaxAttempts: 5, InitialBackoffMicros: 10 * input.Second, MaxBackoffMicros: 15 * input.Second}
	b.enqueue("a", func(e *orreryv1.Enqueue) { e.Retry = policy })
	var exhausted []Exhaustion
	var failedAt int64
	for attempt, wait := range []int64{10 * input.Second, 15 * input.Second, 15 * input.Second} {
		got := b.receive(testQueue, 1)
		if len(got) != 1 || got[0].GetDeliveryCount() != uint32(attempt+1) {
			t.Fatalf("attempt %d: received %v", attempt+1, got)
		}
		// The previous failure's error and time come with the next delivery.
		if attempt > 0 && (got[0].GetLastError() != "boom" || got[0].GetLastFailedAtUnixMicros() != failedAt) {
			t.Fatalf("attempt %d delivered without the last failure: %v", attempt+1, got[0])
		}
		failedAt = b.now
		b.fail(got[0], "boom", nil, &exhausted)
		msg, _ := b.message(got[0].GetLane(), "a")
		if msg.GetLease() != nil || msg.GetVisibleAtUnixMicros() != failedAt+wait || msg.GetLastError() != "boom" || msg.GetLastFailedAtUnixMicros() != failedAt {
			t.Fatalf("after failed attempt %d: %v, want visible at +%s", attempt+1, msg, input.FormatDuration(wait))
		}
		b.advance(wait - 1)
		if got := b.receive(testQueue, 1); len(got) != 0 {
			t.Fatalf("attempt %d's message delivered %s before its backoff ended", attempt+1, input.FormatDuration(1))
		}
		b.advance(1)
	}
	if len(exhausted) != 0 {
		t.Fatalf("exhausted %v before max_attempts", exhausted)
	}
}

// TestExhaustedRetriesDeadLetterOrDrop: the failed release whose attempt reaches max_attempts
// takes the message out at once: to the dead-letter queue with its last error (the default and
// DEAD_LETTER), or removed with a tombstone that keeps its id taken (DROP); the hook hears how.
func TestExhaustedRetriesDeadLetterOrDrop(t *testing.T) {
	for _, onExhausted := range []orreryv1.RetryExhausted{orreryv1.RetryExhausted_RETRY_EXHAUSTED_UNSPECIFIED, deadLetterOnExhausted, dropOnExhausted} {
		b := setup(t)
		b.setRetry(testQueue, &orreryv1.RetryPolicy{MaxAttempts: 2, OnExhausted: onExhausted})
		b.enqueue("a")
		var exhausted []Exhaustion
		for range 2 {
			got := b.receive(testQueue, 1)
			if len(got) != 1 {
				t.Fatalf("%v: received %v", onExhausted, got)
			}
			b.fail(got[0], "broken", nil, &exhausted)
		}
		lane := laneOf(testQueue, "k")
		if _, live := b.message(lane, "a"); live {
			t.Fatalf("%v: the message is still in its lane after its last attempt", onExhausted)
		}
		dead, inDLQ := b.message(DeadLetterLane(lane), "a")
		_, tombstoned := b.tombstone(lane, "a")
		if onExhausted == dropOnExhausted {
			if inDLQ || !tombstoned || len(exhausted) != 1 || exhausted[0] != Dropped {
				t.Fatalf("drop: in the dead-letter queue %v, tombstoned %v, hook %v", inDLQ, tombstoned, exhausted)
			}
			if res, _ := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: lane, Id: "a", PayloadJson: `{"id":"a"}`}, b.now, CompareOrReturn); res.GetCreated() {
				t.Fatal("a dropped id was taken again")
			}
			continue
		}
		if !inDLQ || dead.GetLastError() != "broken" || dead.GetDeadLetteredFrom() != testQueue || len(exhausted) != 1 || exhausted[0] != DeadLettered {
			t.Fatalf("%v: dead letter %v (found %v), hook %v", onExhausted, dead, inDLQ, exhausted)
		}
	}
}

// TestRetryPolicyPrecedence: a handler's policy (the release's) wins over the message's, which
// wins over the queue's; with none, a failed release waits its delay_micros and the message is
// dead-lettered by max_deliveries at the next receive, as before retry policies.
func TestRetryPolicyPrecedence(t *testing.T) {
	queuePolicy := &orreryv1.RetryPolicy{MaxAttempts: 9, InitialBackoffMicros: 1 * input.Second, MaxBackoffMicros: input.Hour}
	messagePolicy := &orreryv1.RetryPolicy{MaxAttempts: 9, InitialBackoffMicros: 2 * input.Second, MaxBackoffMicros: input.Hour}
	handlerPolicy := &orreryv1.RetryPolicy{MaxAttempts: 9, InitialBackoffMicros: 3 * input.Second, MaxBackoffMicros: input.Hour}
	for _, c := range []struct {
		name             string
		queue, msg, hand *orreryv1.RetryPolicy
		want             int64
	}{
		{"none: delay_micros", nil, nil, nil, 7 * input.Second},
		{"queue", queuePolicy, nil, nil, 1 * input.Second},
		{"message over queue", queuePolicy, messagePolicy, nil, 2 * input.Second},
		{"handler over message", queuePolicy, messagePolicy, handlerPolicy, 3 * input.Second},
		{"handler over queue", queuePolicy, nil, handlerPolicy, 3 * input.Second},
	} {
		b := setup(t)
		if c.queue != nil {
			b.setRetry(testQueue, c.queue)
		}
		b.enqueue("a", func(e *orreryv1.Enqueue) { e.Retry = c.msg })
		got := b.receive(testQueue, 1)
		if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: got[0].GetLane(), Id: "a", LeaseToken: got[0].GetLease().GetToken(),
			DelayMicros: 7 * input.Second, Error: "x", Backoff: true, Retry: c.hand}, b.now); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if msg, _ := b.message(got[0].GetLane(), "a"); msg.GetVisibleAtUnixMicros() != b.now+c.want {
			t.Fatalf("%s: visible at +%s, want +%s", c.name, input.FormatDuration(msg.GetVisibleAtUnixMicros()-b.now), input.FormatDuration(c.want))
		}
	}
	// No policy: the failed attempt that used up max_deliveries is dead-lettered by the next
	// receive, not by the release.
	b := setup(t)
	b.enqueue("a", func(e *orreryv1.Enqueue) { e.MaxDeliveries = 1 })
	got := b.receive(testQueue, 1)
	var exhausted []Exhaustion
	b.fail(got[0], "x", nil, &exhausted)
	if _, live := b.message(got[0].GetLane(), "a"); !live || len(exhausted) != 0 {
		t.Fatalf("without a policy the release took the message out (live %v, hook %v)", live, exhausted)
	}
	if got := b.receive(testQueue, 1); len(got) != 0 {
		t.Fatalf("delivered beyond max_deliveries: %v", got)
	}
	if dead, found := b.message(DeadLetterLane(got0Lane(got)), "a"); !found || dead.GetLastError() != "x" {
		t.Fatalf("the next receive did not dead-letter it with its last error: %v", dead)
	}
}

func got0Lane(got []*orreryv1.QueueMessage) *orreryv1.Lane {
	if len(got) > 0 {
		return got[0].GetLane()
	}
	return laneOf(testQueue, "k")
}

// TestAnEndedLeaseCountsAsAnAttempt: a policy's max_attempts replaces max_deliveries for
// receives too, so a message whose lease ends unanswered on its last attempt is dropped (DROP)
// by the next receive instead of being delivered again.
func TestAnEndedLeaseCountsAsAnAttempt(t *testing.T) {
	b := setup(t)
	b.enqueue("a", func(e *orreryv1.Enqueue) {
		e.MaxDeliveries = 5
		e.Retry = &orreryv1.RetryPolicy{MaxAttempts: 1, OnExhausted: dropOnExhausted}
	})
	if got := b.receive(testQueue, 1); len(got) != 1 {
		t.Fatalf("received %v", got)
	}
	b.advance(input.Hour)
	var heard []Exhaustion
	res, err := ApplyReceiveNoting(b.store, b.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: testQueue}, b.now, func(_ *orreryv1.QueueMessage, how Exhaustion) error {
		heard = append(heard, how)
		return nil
	})
	if err != nil || len(res.GetMessages()) != 0 || len(heard) != 1 || heard[0] != Dropped {
		t.Fatalf("receive after the only attempt's lease ended: %v %v, hook %v", res, err, heard)
	}
	if _, gone := b.tombstone(laneOf(testQueue, "k"), "a"); !gone {
		t.Fatal("the dropped message left no tombstone")
	}
	b.check()
}

// TestSetQueueRetryPolicy: setting a policy records who and when, setting it again changes
// nothing, another policy replaces it, and removing it (twice) leaves nothing; an invalid
// policy names its field and writes nothing.
func TestSetQueueRetryPolicy(t *testing.T) {
	b := setup(t)
	p := &orreryv1.RetryPolicy{MaxAttempts: 3, InitialBackoffMicros: input.Second, MaxBackoffMicros: input.Minute, JitterPercent: 20, OnExhausted: dropOnExhausted}
	res := b.setRetry(testQueue, p)
	if !res.GetChanged() || res.GetRetry().GetSetBy() != "operator" || res.GetRetry().GetSetAtUnixMicros() != b.now || !proto.Equal(res.GetRetry().GetPolicy(), p) {
		t.Fatalf("set: %v", res)
	}
	setAt := b.now
	b.advance(input.Second)
	before := b.store.Clone()
	if res := b.setRetry(testQueue, proto.CloneOf(p)); res.GetChanged() || res.GetRetry().GetSetAtUnixMicros() != setAt || !b.store.Equal(before) {
		t.Fatalf("setting the same policy again: %v (or it wrote)", res)
	}
	other := &orreryv1.RetryPolicy{MaxAttempts: 4}
	if res := b.setRetry(testQueue, other); !res.GetChanged() || !proto.Equal(res.GetRetry().GetPolicy(), other) {
		t.Fatalf("replace: %v", res)
	}
	if held, err := LoadRetryPolicy(b.store, testNamespace, testQueue); err != nil || !proto.Equal(held.GetPolicy(), other) {
		t.Fatalf("load: %v %v", held, err)
	}
	if res := b.setRetry(testQueue, nil); !res.GetChanged() || res.GetRetry() != nil {
		t.Fatalf("remove: %v", res)
	}
	if res := b.setRetry(testQueue, nil); res.GetChanged() {
		t.Fatalf("removing again: %v", res)
	}
	if held, err := LoadRetryPolicy(b.store, testNamespace, testQueue); err != nil || held != nil {
		t.Fatalf("after the removal: %v %v", held, err)
	}
	b.setRetry(testQueue, p)
	for _, c := range []struct {
		policy *orreryv1.RetryPolicy
		field  string
	}{
		{&orreryv1.RetryPolicy{MaxAttempts: b.lim.MaxMaxDeliveries + 1}, "policy.max_attempts"},
		{&orreryv1.RetryPolicy{InitialBackoffMicros: -1}, "policy.initial_backoff_micros"},
		{&orreryv1.RetryPolicy{MaxBackoffMicros: b.lim.MaxDelayMicros + 1}, "policy.max_backoff_micros"},
		{&orreryv1.RetryPolicy{InitialBackoffMicros: 2, MaxBackoffMicros: 1}, "policy.initial_backoff_micros"},
		{&orreryv1.RetryPolicy{JitterPercent: 101}, "policy.jitter_percent"},
		{&orreryv1.RetryPolicy{OnExhausted: 7}, "policy.on_exhausted"},
	} {
		before := b.store.Clone()
		_, err := ApplySetRetryPolicy(b.store, b.lim, "operator", &orreryv1.SetQueueRetryPolicy{Namespace: testNamespace, Queue: testQueue, Policy: c.policy}, b.now)
		wantCode(t, err, orrery.CodeValidation, c.field)
		if !b.store.Equal(before) {
			t.Fatalf("a refused policy (%s) wrote", c.field)
		}
	}
}

// TestRetryFieldsAreValidated: an enqueue's and a release's policy name their fields, and a
// refused release writes nothing.
func TestRetryFieldsAreValidated(t *testing.T) {
	b := setup(t)
	_, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "a", Retry: &orreryv1.RetryPolicy{JitterPercent: 200}}, b.now, CompareOrReturn)
	wantCode(t, err, orrery.CodeValidation, "retry.jitter_percent")
	b.enqueue("a")
	got := b.receive(testQueue, 1)
	before := b.store.Clone()
	_, err = ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: got[0].GetLane(), Id: "a", LeaseToken: got[0].GetLease().GetToken(), Backoff: true,
		Retry: &orreryv1.RetryPolicy{InitialBackoffMicros: input.Hour, MaxBackoffMicros: input.Second}}, b.now)
	wantCode(t, err, orrery.CodeValidation, "retry.initial_backoff_micros")
	if !b.store.Equal(before) {
		t.Fatal("a refused release wrote")
	}
}

// TestLastErrorIsCutAtAUTF8Boundary: a long error is kept to MaxLastErrorBytes, never splitting
// a character.
func TestLastErrorIsCutAtAUTF8Boundary(t *testing.T) {
	long := strings.Repeat("é", MaxLastErrorBytes) // two bytes each
	cut := TruncateError("x" + long)
	if len(cut) > MaxLastErrorBytes || len(cut) < MaxLastErrorBytes-1 || !strings.HasPrefix("x"+long, cut) || !utf8Valid(cut) {
		t.Fatalf("cut to %d bytes (valid %v)", len(cut), utf8Valid(cut))
	}
	if TruncateError("short") != "short" {
		t.Fatal("a short error was changed")
	}
	b := setup(t)
	b.enqueue("a")
	got := b.receive(testQueue, 1)
	if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: got[0].GetLane(), Id: "a", LeaseToken: got[0].GetLease().GetToken(), Error: long}, b.now); err != nil {
		t.Fatal(err)
	}
	if msg, _ := b.message(got[0].GetLane(), "a"); len(msg.GetLastError()) > MaxLastErrorBytes || !utf8Valid(msg.GetLastError()) {
		t.Fatalf("stored last error of %d bytes", len(msg.GetLastError()))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
