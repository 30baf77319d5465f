package queue

import (
	"fmt"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// share sets the test queue's share (policy maxLeased, perSecond; shareLeased,
// shareMilliPerSecond) and requires success.
func (b *bundle) share(maxLeased, perSecond, shareLeased uint32, shareMilliPerSecond uint64) *orreryv1.QueueShareResult {
	b.t.Helper()
	res, err := ApplySetShare(b.store, b.lim, "operator", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue,
		Policy:      &orreryv1.QueueLimits{MaxLeased: maxLeased, LeasesPerSecond: perSecond},
		ShareLeased: shareLeased, ShareMilliPerSecond: shareMilliPerSecond}, b.now)
	if err != nil {
		b.t.Fatalf("set share: %v", err)
	}
	b.check()
	return res
}

// nextReceivable is NextVisibleBefore of the test queue within a day.
func (b *bundle) nextReceivable() (int64, bool) {
	b.t.Helper()
	at, found, err := NextVisibleBefore(b.store, testNamespace, testQueue, b.now+input.Day)
	if err != nil {
		b.t.Fatal(err)
	}
	return at, found
}

func (b *bundle) visibleNow() bool {
	b.t.Helper()
	visible, err := VisibleAt(b.store, testNamespace, testQueue, b.now)
	if err != nil {
		b.t.Fatal(err)
	}
	return visible
}

// TestAShareCapsLeasedMessagesUntilALeaseEnds: a queue whose share is 2 leases at most 2 at
// once; while 2 are held nothing is visible to a waiting receive and its next receivable
// instant is the earliest lease end; an ack, a release and a lease that ends by time each free
// one; the stats show the share and the leases it counts.
func TestAShareCapsLeasedMessagesUntilALeaseEnds(t *testing.T) {
	b := setup(t)
	for i := range 6 {
		b.enqueue(idOf(i))
	}
	if res := b.share(2, 0, 2, 0); !res.GetChanged() || res.GetShare().GetShareLeased() != 2 || res.GetLeased() != 0 {
		t.Fatalf("set share: %v", res)
	}
	held := b.receive(testQueue, 10)
	if len(held) != 2 {
		t.Fatalf("a share of 2 leased %v", ids(held))
	}
	b.advance(input.Second)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("at the cap a receive leased %v", ids(got))
	}
	if b.visibleNow() {
		t.Fatal("VisibleAt at the cap: want nothing receivable")
	}
	if at, found := b.nextReceivable(); !found || at != held[0].GetLease().GetUntilUnixMicros() {
		t.Fatalf("next receivable at the cap: %d, %v; want the first lease end %d", at, found, held[0].GetLease().GetUntilUnixMicros())
	}
	if s := b.stats(""); s.GetShare().GetShareLeased() != 2 || s.GetShareLeasedNow() != 2 {
		t.Fatalf("stats at the cap: share %v, leased now %d", s.GetShare(), s.GetShareLeasedNow())
	}
	// An ack frees one.
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: held[0].GetLane(), Id: held[0].GetId(), LeaseToken: held[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if !b.visibleNow() {
		t.Fatal("after an ack: want a message receivable")
	}
	third := b.receive(testQueue, 10)
	if len(third) != 1 {
		t.Fatalf("after an ack leased %v, want one", ids(third))
	}
	// A release frees one.
	if _, err := ApplyRelease(b.store, b.lim, &orreryv1.Release{Lane: held[1].GetLane(), Id: held[1].GetId(), LeaseToken: held[1].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if got := b.receive(testQueue, 10); len(got) != 1 {
		t.Fatalf("after a release leased %v, want one", ids(got))
	}
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("at the cap again a receive leased %v", ids(got))
	}
	// Leases that end by time free their places without any command.
	b.advance(b.lim.DefaultLeaseMicros)
	if got := b.receive(testQueue, 10); len(got) != 2 {
		t.Fatalf("after the leases ended leased %v, want two", ids(got))
	}
	if s := b.stats(""); s.GetShareLeasedNow() != 2 {
		t.Fatalf("leased now %d, want 2", s.GetShareLeasedNow())
	}
}

// TestAShareCountsLeasesFromBeforeAndExtendedOnes: a first share counts the leases taken
// before it (adoptLeases) until they end, an extension moves a counted lease (it still counts
// after its first end), and removing the cap removes the share and its entries: receives lease
// freely again.
func TestAShareCountsLeasesFromBeforeAndExtendedOnes(t *testing.T) {
	b := setup(t)
	for i := range 5 {
		b.enqueue(idOf(i))
	}
	before := b.receive(testQueue, 1)
	b.share(1, 0, 1, 0)
	if s := b.stats(""); s.GetShareLeasedNow() != 1 {
		t.Fatalf("a first share counts %d leases, want %s's from before it", s.GetShareLeasedNow(), before[0].GetId())
	}
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("a share of 1 with %s leased before it leased %v", before[0].GetId(), ids(got))
	}
	b.advance(b.lim.DefaultLeaseMicros) // the lease from before ends: its place is free
	held := b.receive(testQueue, 10)
	if len(held) != 1 {
		t.Fatalf("a share of 1 once the lease from before ended leased %v", ids(held))
	}
	b.advance(input.Second)
	if _, err := ApplyExtendLease(b.store, b.lim, &orreryv1.ExtendLease{Lane: held[0].GetLane(), Id: held[0].GetId(), LeaseToken: held[0].GetLease().GetToken(), LeaseDurationMicros: 2 * b.lim.DefaultLeaseMicros}, b.now); err != nil {
		t.Fatal(err)
	}
	b.advance(b.lim.DefaultLeaseMicros)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("past the first end of an extended lease a receive leased %v", ids(got))
	}
	res, err := ApplySetShare(b.store, b.lim, "operator", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue}, b.now)
	if err != nil || !res.GetChanged() || res.GetShare() != nil {
		t.Fatalf("remove the cap: %v, %v", res, err)
	}
	if got := b.receive(testQueue, 10); len(got) != 4 {
		t.Fatalf("without the cap leased %v, want the four others", ids(got))
	}
	if err := kv.ScanPrefix(b.store, keys.QueueShare, func(k, _ []byte) (bool, error) {
		return false, fmt.Errorf("key %x left behind", k)
	}); err != nil {
		t.Fatalf("after the cap was removed: %v", err)
	}
	if s := b.stats(""); s.GetShare() != nil || s.GetShareLeasedNow() != 0 {
		t.Fatalf("stats without the cap: %v", s)
	}
}

// TestAShareBucketAdmitsItsRateByLoggedTime: a share of 2 leases a second leases a burst of 2,
// then one every half second of logged time, never more than its burst however long it
// waited; a share of half a lease a second leases one every two seconds.
func TestAShareBucketAdmitsItsRateByLoggedTime(t *testing.T) {
	b := setup(t)
	for i := range 20 {
		b.enqueue(idOf(i))
	}
	b.share(0, 4, 0, 2000)
	if got := b.receive(testQueue, 10); len(got) != 2 {
		t.Fatalf("a full bucket of 2 leased %v", ids(got))
	}
	if b.visibleNow() {
		t.Fatal("an empty bucket: want nothing receivable")
	}
	if at, found := b.nextReceivable(); !found || at != b.now+input.Second/2 {
		t.Fatalf("next receivable with an empty bucket: %d, %v; want %d", at, found, b.now+input.Second/2)
	}
	b.advance(input.Second/2 - 1)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("before half a second leased %v", ids(got))
	}
	b.advance(1)
	if got := b.receive(testQueue, 10); len(got) != 1 {
		t.Fatalf("after half a second leased %v, want one", ids(got))
	}
	b.advance(input.Hour)
	if got := b.receive(testQueue, 10); len(got) != 2 {
		t.Fatalf("after an hour leased %v, want the burst of two", ids(got))
	}
	// Half a lease a second: a burst of one, then one every two seconds.
	b.share(0, 4, 0, 500)
	b.advance(input.Hour)
	if got := b.receive(testQueue, 10); len(got) != 1 {
		t.Fatalf("a half-lease share leased %v, want one", ids(got))
	}
	b.advance(2*input.Second - 1)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("within two seconds leased %v", ids(got))
	}
	b.advance(1)
	if got := b.receive(testQueue, 10); len(got) != 1 {
		t.Fatalf("after two seconds leased %v, want one", ids(got))
	}
	// A share of 0 under a rate limit leases nothing and has no receivable instant.
	b.share(0, 4, 0, 0)
	b.advance(input.Hour)
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("a share of 0 leased %v", ids(got))
	}
	if _, found := b.nextReceivable(); found {
		t.Fatal("a share of 0 has a receivable instant")
	}
}

// TestARefusedSetShareWritesNothing: each invalid SetQueueShare names its field and leaves the
// store as it was; setting the share in force again reports changed false.
func TestARefusedSetShareWritesNothing(t *testing.T) {
	b := setup(t)
	b.enqueue("a")
	b.share(3, 0, 1, 0)
	policy := func(k, r uint32) *orreryv1.QueueLimits {
		return &orreryv1.QueueLimits{MaxLeased: k, LeasesPerSecond: r}
	}
	for _, c := range []struct {
		name  string
		m     *orreryv1.SetQueueShare
		field string
	}{
		{"no limit", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(0, 0)}, "policy"},
		{"a share without a policy", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, ShareLeased: 1}, "policy"},
		{"too many leased", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(MaxQueueLeased+1, 0)}, "policy.max_leased"},
		{"too fast", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(0, MaxQueueLeasesPerSecond+1)}, "policy.leases_per_second"},
		{"a share above the cap", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(2, 0), ShareLeased: 3}, "share_leased"},
		{"a rate share without a rate", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(2, 0), ShareMilliPerSecond: 1}, "share_milli_per_second"},
		{"a rate share above the rate", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue, Policy: policy(0, 2), ShareMilliPerSecond: 2001}, "share_milli_per_second"},
		{"a bad queue", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: "", Policy: policy(1, 0)}, "queue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := b.store.Clone()
			_, err := ApplySetShare(b.store, b.lim, "operator", c.m, b.now)
			wantCode(t, err, orrery.CodeValidation, c.field)
			if !b.store.Equal(before) {
				t.Fatal("a refused SetQueueShare wrote")
			}
		})
	}
	if res := b.share(3, 0, 1, 0); res.GetChanged() {
		t.Fatalf("setting the share in force: %v, want changed false", res)
	}
}

// TestASetShareComparesTheShareInForce: a compare-and-set succeeds against the share in force
// (0: none) and fails RevisionConflict, writing nothing, against any other, even one set at
// the same logged time.
func TestASetShareComparesTheShareInForce(t *testing.T) {
	b := setup(t)
	set := func(expected int64, shareLeased uint32) (*orreryv1.QueueShareResult, error) {
		return ApplySetShare(b.store, b.lim, "rebalancer", &orreryv1.SetQueueShare{Namespace: testNamespace, Queue: testQueue,
			Policy: &orreryv1.QueueLimits{MaxLeased: 4}, ShareLeased: shareLeased, Compare: true, ExpectedSetAtUnixMicros: expected}, b.now)
	}
	first, err := set(0, 2)
	if err != nil || !first.GetChanged() {
		t.Fatalf("a compare-and-set of no share: %v, %v", first, err)
	}
	b.advance(1)
	before := b.store.Clone()
	_, err = set(0, 3)
	wantCode(t, err, orrery.CodeRevisionConflict, "expected_set_at_unix_micros")
	if !b.store.Equal(before) {
		t.Fatal("a failed compare-and-set wrote")
	}
	if second, err := set(first.GetShare().GetSetAtUnixMicros(), 3); err != nil || second.GetShare().GetShareLeased() != 3 {
		t.Fatalf("a compare-and-set of the share in force: %v, %v", second, err)
	}
	_, err = set(first.GetShare().GetSetAtUnixMicros(), 1)
	wantCode(t, err, orrery.CodeRevisionConflict, "expected_set_at_unix_micros")
	// Two changes at one logged time (one batch) are told apart.
	current, err := LoadShare(b.store, testNamespace, testQueue)
	if err != nil {
		t.Fatal(err)
	}
	third, err := set(current.GetSetAtUnixMicros(), 2)
	if err != nil || third.GetShare().GetSetAtUnixMicros() == current.GetSetAtUnixMicros() {
		t.Fatalf("a second change at logged time %d: %v, %v; want another set_at", b.now, third, err)
	}
	_, err = set(current.GetSetAtUnixMicros(), 1)
	wantCode(t, err, orrery.CodeRevisionConflict, "expected_set_at_unix_micros")
}

// TestAShareIsNeverSetBelowTheLeasesItCounts: lowering a share below the leases it counts sets
// it to them (at most the cap), and the result says so; once a lease ends, a lowering goes
// further.
func TestAShareIsNeverSetBelowTheLeasesItCounts(t *testing.T) {
	b := setup(t)
	for i := range 4 {
		b.enqueue(idOf(i))
	}
	b.share(4, 0, 3, 0)
	held := b.receive(testQueue, 10)
	if len(held) != 3 {
		t.Fatalf("a share of 3 leased %v", ids(held))
	}
	if res := b.share(4, 0, 1, 0); res.GetShare().GetShareLeased() != 3 || res.GetLeased() != 3 || res.GetChanged() {
		t.Fatalf("lowering a share of 3 holding 3 to 1: %v; want it kept at 3, unchanged", res)
	}
	if res := b.share(2, 0, 1, 0); res.GetShare().GetShareLeased() != 2 || !res.GetChanged() {
		t.Fatalf("lowering the cap to 2 under 3 leases: %v; want the share at the cap, 2", res)
	}
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: held[0].GetLane(), Id: held[0].GetId(), LeaseToken: held[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if got := b.receive(testQueue, 10); len(got) != 0 {
		t.Fatalf("2 leases held under a share of 2: leased %v", ids(got))
	}
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: held[1].GetLane(), Id: held[1].GetId(), LeaseToken: held[1].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	if res := b.share(2, 0, 0, 0); res.GetShare().GetShareLeased() != 1 || res.GetLeased() != 1 {
		t.Fatalf("lowering to 0 with 1 lease held: %v; want 1", res)
	}
}
