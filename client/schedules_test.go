package client_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/orreryhq/orrery/internal/testkit"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// reportOptions is a schedule due every minute from an hour ahead, in testQueue under key k.
func reportOptions(payload string) client.ScheduleOptions {
	first := time.Now().Add(time.Hour).Truncate(time.Second)
	return client.ScheduleOptions{Queue: testQueue, Key: "k", Spec: client.Every(time.Minute, first), PayloadJSON: payload}
}

func TestUpsertCreatesThenLeavesAnUnchangedScheduleAlone(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	opts := reportOptions(`{"v":1}`)
	h, err := schedules.Upsert(ctx, "report", opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != "report" || first.ID != client.ScheduleID(testNamespace, "report") || first.State != client.ScheduleActive ||
		first.Options.PayloadJSON != `{"v":1}` || first.Options.Queue != testQueue || first.Options.Key != "k" {
		t.Fatalf("described %+v", first)
	}
	wantDue := time.UnixMicro(opts.Spec.GetEvery().GetFirstDueAtUnixMicros()).UTC()
	if !first.NextDue.Equal(wantDue) || len(first.NextFireTimes) == 0 || !first.NextFireTimes[0].Equal(wantDue) {
		t.Fatalf("next due %v, next fire times %v; want %v first", first.NextDue, first.NextFireTimes, wantDue)
	}

	if _, err := schedules.Upsert(ctx, "report", opts); err != nil {
		t.Fatal(err)
	}
	again, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Revision != first.Revision || again.Generation != first.Generation {
		t.Fatalf("an Upsert of the same options moved revision %d to %d, generation %d to %d",
			first.Revision, again.Revision, first.Generation, again.Generation)
	}

	if _, err := schedules.Upsert(ctx, "report", reportOptions(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	changed, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Generation != first.Generation+1 || changed.Options.PayloadJSON != `{"v":2}` {
		t.Fatalf("an Upsert of new options: generation %d (was %d), payload %s", changed.Generation, first.Generation, changed.Options.PayloadJSON)
	}
}

func TestCreateRefusesANameThatExists(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	if _, err := schedules.Create(ctx, "report", reportOptions("")); err != nil {
		t.Fatal(err)
	}
	if _, err := schedules.Create(ctx, "report", reportOptions("")); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("a second Create of one name: %v, want RevisionConflict", err)
	}
	if _, err := schedules.Create(ctx, "", reportOptions("")); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("Create without a name: %v, want Validation", err)
	}
}

func TestAScheduleIsPausedResumedTriggeredAndDeletedByName(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	if _, err := schedules.Create(ctx, "report", reportOptions(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	h := schedules.Handle(testQueue, "k", "report") // by name, without a call
	if err := h.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != client.SchedulePaused || d.PausedAt.IsZero() {
		t.Fatalf("after Pause: state %v, paused at %v", d.State, d.PausedAt)
	}
	if _, err := h.Trigger(ctx); err == nil {
		t.Fatal("Trigger of a paused schedule succeeded")
	}
	if err := h.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := h.Trigger(ctx)
	if err != nil || id == "" {
		t.Fatalf("Trigger: %q, %v", id, err)
	}
	msgs, _, err := b.c.InspectLane(ctx, &orreryv1.Lane{Namespace: testNamespace, Queue: testQueue, Key: "k"}, "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].GetId() != id {
		t.Fatalf("the lane after Trigger: %v, %v; want the one message %s", msgs, err, id)
	}
	if d, err = h.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	if d.State != client.ScheduleActive || len(d.LastOutcomes) == 0 || !d.LastOutcomes[0].Manual || d.LastOutcomes[0].MessageID != id {
		t.Fatalf("after Resume and Trigger: state %v, last outcomes %+v", d.State, d.LastOutcomes)
	}
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Describe(ctx); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("Describe after Delete: %v, want NotFound", err)
	}
}

func TestUpdateReadsAgainWhenTheRevisionMoves(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Upsert(ctx, "report", reportOptions(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = h.Update(ctx, func(o *client.ScheduleOptions) {
		calls++
		if calls == 1 { // a pause and a resume between the read and the write move the revision
			if err := errors.Join(h.Pause(ctx), h.Resume(ctx)); err != nil {
				t.Fatal(err)
			}
		}
		o.PayloadJSON = `{"v":2}`
		o.Overlap = client.OverlapSkip
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("change called %d times, want 2 (once more after the revision moved)", calls)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Options.PayloadJSON != `{"v":2}` || d.Options.Overlap != client.OverlapSkip || d.Options.Spec.GetEvery().GetIntervalMicros() != time.Minute.Microseconds() {
		t.Fatalf("after Update: %+v", d.Options)
	}
	err = h.Update(ctx, func(o *client.ScheduleOptions) { o.Queue = "elsewhere" })
	if !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("Update of the queue: %v, want Validation", err)
	}
	missing := b.c.Schedules(testNamespace).Handle(testQueue, "k", "missing")
	if err := missing.Update(ctx, func(*client.ScheduleOptions) {}); !errors.Is(err, orrery.ErrNotFound) {
		t.Fatalf("Update of a missing schedule: %v, want NotFound", err)
	}
}

func TestListIteratesEverySchedulePageByPage(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	var want []string
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if _, err := schedules.Create(ctx, name, reportOptions("")); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if err := schedules.Handle(testQueue, "k", "c").Pause(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for d, err := range schedules.List(ctx, client.ListSchedules{PageSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	var paused []string
	for d, err := range schedules.List(ctx, client.ListSchedules{State: client.SchedulePaused}) {
		if err != nil {
			t.Fatal(err)
		}
		paused = append(paused, d.Name)
	}
	if !slices.Equal(paused, []string{"c"}) {
		t.Fatalf("listed paused %v, want [c]", paused)
	}
	n := 0
	for range schedules.List(ctx, client.ListSchedules{PageSize: 2}) {
		if n++; n == 3 {
			break
		}
	}
}

func TestUpsertOfEverySpecKindIsIdempotent(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	for name, spec := range map[string]*orreryv1.ScheduleSpec{
		"every": client.Every(time.Minute, at), "cron": client.Cron("0 9 * * MON-FRI", "Europe/Paris"),
		"at": client.At(at), "after": client.After(time.Hour),
	} {
		opts := client.ScheduleOptions{Queue: testQueue, Key: name, Spec: spec, PayloadJSON: `{}`, HeadersJSON: `{"h":"1"}`,
			TimeToLive: time.Hour, MaxDeliveries: 3, Misfire: client.MisfireSkip, Overlap: client.OverlapBufferOne, CatchUpWindow: time.Minute}
		h, err := schedules.Upsert(ctx, name, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before, err := h.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schedules.Upsert(ctx, name, opts); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after, err := h.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Revision != before.Revision {
			t.Errorf("%s: a second Upsert of the same options moved the revision from %d to %d", name, before.Revision, after.Revision)
		}
		if after.Options.TimeToLive != time.Hour || after.Options.MaxDeliveries != 3 || after.Options.Misfire != client.MisfireSkip ||
			after.Options.CatchUpWindow != time.Minute || after.Options.HeadersJSON != `{"h":"1"}` {
			t.Errorf("%s: described options %+v", name, after.Options)
		}
	}
}

func TestAScheduleWithoutAKeyIsKeyedByItsName(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	opts := reportOptions("")
	opts.Key = ""
	if _, err := schedules.Create(ctx, "nightly", opts); err != nil {
		t.Fatal(err)
	}
	d, err := schedules.Handle(testQueue, "", "nightly").Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Options.Key != "nightly" || d.Partition != b.c.PartitionOf(&orreryv1.Lane{Namespace: testNamespace, Queue: testQueue, Key: "nightly"}) {
		t.Fatalf("key %q in partition %d, want the name's", d.Options.Key, d.Partition)
	}
}

// TestAStartInThePastIsRefusedUnlessItsCatchUpIsBounded: an Every schedule starting 72 h ago
// every minute would enqueue 4,321 messages at once; Create and Upsert refuse it, naming the
// count and the ways out, and accept it with a catch-up window, which bounds what is enqueued.
func TestAStartInThePastIsRefusedUnlessItsCatchUpIsBounded(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	opts := client.ScheduleOptions{Queue: testQueue, Key: "k", Spec: client.Every(time.Minute, b.clock.Now().Add(-72*time.Hour))}
	_, err := schedules.Create(ctx, "flood", opts)
	if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "4321 instants") || !strings.Contains(err.Error(), "CatchUpWindow") {
		t.Fatalf("Create starting 72 h ago: %v, want Validation naming 4321 instants and CatchUpWindow", err)
	}
	if _, err := schedules.Upsert(ctx, "flood", opts); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("Upsert starting 72 h ago: %v, want Validation", err)
	}
	opts.CatchUpWindow = 10 * time.Minute
	h, err := schedules.Create(ctx, "flood", opts)
	if err != nil {
		t.Fatalf("Create with a 10-minute catch-up window: %v", err)
	}
	first := time.UnixMicro(opts.Spec.GetEvery().GetFirstDueAtUnixMicros()).UTC()
	if w, ok := h.LastWrite(); !ok || w.AlreadyDue != 4321 || !w.FirstAlreadyDue.Equal(first) || !w.LastAlreadyDue.Equal(first.Add(72*time.Hour)) {
		t.Fatalf("the create's write: %+v, %v; want 4321 instants already due from %v", w, ok, first)
	}
	if again, err := schedules.Upsert(ctx, "flood", opts); err != nil {
		t.Fatal(err)
	} else if _, wrote := again.LastWrite(); wrote {
		t.Fatal("an Upsert of the definition as it is reports a write")
	}
	n, err := b.tr.EmitDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 || n > 11 {
		t.Fatalf("the catch-up enqueued %d occurrences, want the 10 or 11 of the last 10 minutes", n)
	}
	opts.CatchUpWindow, opts.Misfire = 0, client.MisfireSkip
	if _, err := schedules.Create(ctx, "skips", opts); err != nil {
		t.Fatalf("Create with MisfireSkip: %v", err)
	}
	recent := client.ScheduleOptions{Queue: testQueue, Key: "k", Spec: client.Every(time.Minute, b.clock.Now().Add(-30*time.Second))}
	if _, err := schedules.Create(ctx, "recent", recent); err != nil {
		t.Fatalf("Create whose one instant is already due: %v", err)
	}
}

// TestADeletedNameIsGivenToANewSchedule: a deleted schedule's identity stays terminal, but its
// name is not burnt: an Upsert of the name creates a new schedule under a new id (whose
// occurrences carry that id), a handle of the deleted one keeps addressing it and fails
// NotFound saying it was deleted, and a handle of the name addresses the new one.
func TestADeletedNameIsGivenToANewSchedule(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	old, err := schedules.Upsert(ctx, "report", reportOptions(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	renewed, err := schedules.Upsert(ctx, "report", reportOptions(`{"v":2}`))
	if err != nil {
		t.Fatalf("Upsert of a deleted schedule's name: %v", err)
	}
	d, err := renewed.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldID := client.ScheduleID(testNamespace, "report")
	if d.ID == oldID || d.ID == "" || d.Name != "report" || d.Options.PayloadJSON != `{"v":2}` || d.Generation != 1 || renewed.ID() != d.ID {
		t.Fatalf("the new schedule of the name: id %s (the deleted one's %s), handle id %s, %+v", d.ID, oldID, renewed.ID(), d)
	}
	if old.ID() != oldID {
		t.Fatalf("the deleted schedule's handle moved to %s", old.ID())
	}
	for name, call := range map[string]func() error{
		"Describe": func() error { _, err := old.Describe(ctx); return err },
		"Pause":    func() error { return old.Pause(ctx) },
		"Trigger":  func() error { _, err := old.Trigger(ctx); return err },
		"Update":   func() error { return old.Update(ctx, func(o *client.ScheduleOptions) { o.PayloadJSON = `{"v":3}` }) },
	} {
		if err := call(); !errors.Is(err, orrery.ErrNotFound) || !strings.Contains(err.Error(), "was deleted") {
			t.Errorf("%s through the deleted schedule's handle: %v, want NotFound saying it was deleted", name, err)
		}
	}
	if d, err := renewed.Describe(ctx); err != nil || d.State != client.ScheduleActive || d.Options.PayloadJSON != `{"v":2}` {
		t.Fatalf("the new schedule after calls on the old handle: %+v, %v", d, err)
	}
	byName := schedules.Handle(testQueue, "k", "report")
	if err := byName.Pause(ctx); err != nil {
		t.Fatalf("Pause by name: %v", err)
	}
	if byName.ID() != d.ID {
		t.Fatalf("a handle of the name addresses %s, want the new schedule %s", byName.ID(), d.ID)
	}
	if d, err := renewed.Describe(ctx); err != nil || d.State != client.SchedulePaused {
		t.Fatalf("the new schedule after a Pause by name: %+v, %v", d, err)
	}
	id, err := b.c.ScheduleIDOf(ctx, lane(testQueue, "k"), "report")
	if err != nil || id != d.ID {
		t.Fatalf("ScheduleIDOf the name: %s, %v; want %s", id, err, d.ID)
	}
	if _, err := schedules.Create(ctx, "report", reportOptions("")); !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("Create of a name whose new schedule lives: %v, want RevisionConflict", err)
	}
}

// TestConcurrentUpsertsOfADeletedNameCreateOneSchedule: Upserts racing to declare a deleted
// name, every one of them reading the name before any writes, all succeed, and exactly one new
// schedule exists, at generation 1.
func TestConcurrentUpsertsOfADeletedNameCreateOneSchedule(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	h, err := schedules.Upsert(ctx, "report", reportOptions(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	opts := reportOptions(`{"v":2}`)
	const racers = 8
	// The first configure of each racer waits until every racer has sent one: all of them
	// read the name while no new schedule exists.
	var arrived atomic.Int32
	allRead := make(chan struct{})
	b.tr.SetFaultHook(func(_ int, req *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if m := req.GetBatch().GetMutations(); len(m) == 1 && m[0].GetConfigureSchedule() != nil && arrived.Add(1) <= racers {
			if arrived.Load() == racers {
				close(allRead)
			}
			select {
			case <-allRead:
			case <-ctx.Done():
			}
		}
		return clienttest.FaultNone, nil
	})
	ids := make(chan string, racers)
	errs := make(chan error, racers)
	start := make(chan struct{})
	for range racers {
		go func() {
			<-start
			h, err := schedules.Upsert(ctx, "report", opts)
			if err != nil {
				errs <- err
				return
			}
			ids <- h.ID()
		}()
	}
	close(start)
	seen := map[string]bool{}
	for range racers {
		select {
		case err := <-errs:
			t.Fatalf("a racing Upsert: %v", err)
		case id := <-ids:
			seen[id] = true
		}
	}
	var listed []*client.ScheduleDescription
	for d, err := range schedules.List(ctx, client.ListSchedules{}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, d)
	}
	if n := arrived.Load(); n < racers {
		t.Fatalf("%d configures sent by %d racers", n, racers)
	}
	if len(seen) != 1 || len(listed) != 1 || !seen[listed[0].ID] || listed[0].Generation != 1 || listed[0].ID == h.ID() {
		t.Fatalf("racing Upserts returned ids %v; the namespace lists %d schedules (%+v); want one new one at generation 1", seen, len(listed), listed)
	}
}

// TestARefusalSaysWhichStateRefusedIt: a Trigger of a paused schedule fails ErrSchedulePaused
// (not ErrScheduleCancelled) and says to resume it; of a cancelled one ErrScheduleCancelled.
func TestARefusalSaysWhichStateRefusedIt(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "report", reportOptions(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = h.Trigger(ctx)
	if !errors.Is(err, client.ErrSchedulePaused) || errors.Is(err, client.ErrScheduleCancelled) || errors.Is(err, client.ErrScheduleSuspended) ||
		!errors.Is(err, orrery.ErrSuspended) || !strings.Contains(err.Error(), "it is paused; resume it first") {
		t.Fatalf("Trigger of a paused schedule: %v, want ErrSchedulePaused saying to resume it", err)
	}
	if err := h.Pause(ctx); !errors.Is(err, client.ErrSchedulePaused) {
		t.Fatalf("Pause of a paused schedule: %v, want ErrSchedulePaused", err)
	}
	if err := h.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Trigger(ctx); !errors.Is(err, client.ErrScheduleCancelled) || errors.Is(err, client.ErrSchedulePaused) {
		t.Fatalf("Trigger of a cancelled schedule: %v, want ErrScheduleCancelled", err)
	}
	if err := h.Resume(ctx); !errors.Is(err, client.ErrScheduleCancelled) {
		t.Fatalf("Resume of a cancelled schedule: %v, want ErrScheduleCancelled", err)
	}
}

// olderSilo is a transport whose partitions answer as a version before names were resolved:
// an InspectSchedule without an id is refused (Validation on schedule_id), and a read by id
// does not say which id it read.
type olderSilo struct{ *clienttest.Transport }

func (o olderSilo) Inspect(ctx context.Context, p int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	if s := req.GetSchedule(); s != nil && s.GetScheduleId() == "" {
		return &orreryv1.InspectReply{Error: orrery.Invalid("schedule_id", "must be a lower-case canonical UUID, got %q", "").Proto()}, nil
	}
	reply, err := o.Transport.Inspect(ctx, p, req)
	if reply != nil {
		reply.ScheduleId, reply.Deleted = "", false
	}
	return reply, err
}

// TestAnOlderSiloGetsTheNamesFirstID: against partitions that cannot read a schedule by name
// (a silo of the version before, during a rolling upgrade), Schedules address a name by its
// first id, as that version's client did.
func TestAnOlderSiloGetsTheNamesFirstID(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	c := client.New(olderSilo{b.tr}, client.Options{Principal: testPrincipal})
	t.Cleanup(func() { _ = c.Close() })
	schedules := c.Schedules(testNamespace)
	h, err := schedules.Upsert(ctx, "report", reportOptions(""))
	if err != nil {
		t.Fatalf("Upsert against an older silo: %v", err)
	}
	if first := client.ScheduleID(testNamespace, "report"); h.ID() != first {
		t.Fatalf("Upsert against an older silo: id %q; want the name's first id %s", h.ID(), first)
	}
	first := h.ID()
	byName := schedules.Handle(testQueue, "k", "report")
	if err := byName.Pause(ctx); err != nil || byName.ID() != first {
		t.Fatalf("Pause by name against an older silo: %v, id %q", err, byName.ID())
	}
	if id, err := c.ScheduleIDOf(ctx, lane(testQueue, "k"), "report"); err != nil || id != first {
		t.Fatalf("ScheduleIDOf against an older silo: %q, %v", id, err)
	}
}

// TestAScheduleCarriesATypedPayload: ScheduleOptions.Payload is marshalled into the template's
// payload, an Upsert of the same value writes nothing, Update may set it, and a value that
// does not marshal is a Validation error on payload with nothing written.
func TestAScheduleCarriesATypedPayload(t *testing.T) {
	type report struct {
		Kind string `json:"kind"`
		Days int    `json:"days"`
	}
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	opts := reportOptions("")
	opts.Payload = report{Kind: "sales", Days: 7}
	h, err := schedules.Upsert(ctx, "typed", opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Options.PayloadJSON != `{"kind":"sales","days":7}` {
		t.Fatalf("the template's payload is %q", first.Options.PayloadJSON)
	}
	if _, err := schedules.Upsert(ctx, "typed", opts); err != nil {
		t.Fatal(err)
	}
	if again, err := h.Describe(ctx); err != nil || again.Revision != first.Revision {
		t.Fatalf("an Upsert of the same payload value moved the revision %d to %d (%v)", first.Revision, again.Revision, err)
	}
	if err := h.Update(ctx, func(o *client.ScheduleOptions) { o.Payload = report{Kind: "sales", Days: 30} }); err != nil {
		t.Fatal(err)
	}
	if updated, err := h.Describe(ctx); err != nil || updated.Options.PayloadJSON != `{"kind":"sales","days":30}` {
		t.Fatalf("after Update the payload is %q (%v)", updated.Options.PayloadJSON, err)
	}
	bad := reportOptions("")
	bad.Payload = make(chan int)
	_, err = schedules.Create(ctx, "unmarshallable", bad)
	var oe *orrery.Error
	if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || oe.Field != "payload" {
		t.Fatalf("Create with a channel payload: %v, want Validation on payload", err)
	}
}

// TestAScheduleEndsAtItsBounds: MaxOccurrences ends a schedule after that many instants: it
// is described completed, saying why, with the bounds read back as given; a negative bound is
// a Validation error.
func TestAScheduleEndsAtItsBounds(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	opts := client.ScheduleOptions{Queue: testQueue, Key: "k", Spec: client.Every(time.Second, time.Now().Truncate(time.Second)),
		MaxOccurrences: 2, EndAt: time.Now().Add(time.Hour).Truncate(time.Second).UTC()}
	h, err := schedules.Create(ctx, "bounded", opts)
	if err != nil {
		t.Fatal(err)
	}
	var d *client.ScheduleDescription
	testkit.Eventually(t, 20*time.Second, "the schedule completed", func() bool {
		if _, err := b.tr.EmitDue(ctx); err != nil {
			t.Fatal(err)
		}
		d, err = h.Describe(ctx)
		return err == nil && d.State == client.ScheduleCompleted
	})
	if d.NextOrdinal != 2 || !strings.Contains(d.EndedBecause, "max_occurrences 2") || d.Options.MaxOccurrences != 2 || !d.Options.EndAt.Equal(opts.EndAt) {
		t.Fatalf("described %+v", d)
	}
	bad := opts
	bad.MaxOccurrences = -1
	_, err = schedules.Create(ctx, "negative", bad)
	var oe *orrery.Error
	if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || oe.Field != "max_occurrences" {
		t.Fatalf("a negative MaxOccurrences: %v, want Validation on max_occurrences", err)
	}
}

// TestAScheduleThatPausesOnFailure: with PauseOnFailure, an occurrence whose handler keeps
// failing is dead-lettered after its deliveries and the schedule pauses, described with the
// reason, and its ledger says dead_lettered.
func TestAScheduleThatPausesOnFailure(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "fragile", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Hour, time.Now().Truncate(time.Second)), MaxDeliveries: 1, PauseOnFailure: true})
	if err != nil {
		t.Fatal(err)
	}
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond,
		Handler: func(context.Context, *client.Message) error { return errors.New("always fails") }})
	stop := runWorker(t, w)
	defer stop()
	var d *client.ScheduleDescription
	testkit.Eventually(t, 20*time.Second, "the schedule paused by its failure", func() bool {
		if _, err := b.tr.EmitDue(ctx); err != nil {
			t.Fatal(err)
		}
		d, err = h.Describe(ctx)
		return err == nil && d.State == client.SchedulePaused
	})
	if !d.Options.PauseOnFailure || !strings.Contains(d.PausedReason, "dead-lettered after 1 deliveries") ||
		len(d.LastOutcomes) == 0 || d.LastOutcomes[0].Outcome != "dead_lettered" {
		t.Fatalf("described %+v", d)
	}
}

// TestCancelOtherCancelsTheRunningHandler: under OverlapCancelOther the next instant's
// occurrence revokes the lease of the one still running, whose handler's context the worker
// cancels at its next lease extension; the ledger says cancelled.
func TestCancelOtherCancelsTheRunningHandler(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "replaced", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Second, time.Now().Truncate(time.Second)), Overlap: client.OverlapCancelOther, CatchUpWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan string, 10)
	w := b.c.NewWorker(client.WorkerConfig{Namespace: testNamespace, Queue: testQueue, Wait: 100 * time.Millisecond, LeaseDuration: 2 * time.Second,
		Handler: func(ctx context.Context, m *client.Message) error {
			<-ctx.Done()
			cancelled <- m.ID()
			return ctx.Err()
		}})
	stop := runWorker(t, w)
	defer stop()
	var first string
	testkit.Eventually(t, 20*time.Second, "a running handler cancelled by the next occurrence", func() bool {
		if _, err := b.tr.EmitDue(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-cancelled:
			return true
		default:
			return false
		}
	})
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range d.LastOutcomes {
		if o.MessageID == first && o.Outcome == "cancelled" {
			return
		}
	}
	t.Fatalf("the cancelled handler's occurrence %s is not ledgered cancelled: %+v", first, d.LastOutcomes)
}

// TestAJitteredScheduleDescribesItsFireTimes: a schedule created with a Jitter keeps it in its
// options, and its next fire times lie each within the jitter after its nominal instant, not
// all on the nominal grid; a jitter below 1 ms is refused naming the field.
func TestAJitteredScheduleDescribesItsFireTimes(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	first := time.Now().Truncate(time.Minute).Add(time.Hour)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "spread", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Minute, first), Jitter: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Options.Jitter != 30*time.Second || d.Options.JitterEarly || len(d.NextFireTimes) < 3 {
		t.Fatalf("described %+v", d)
	}
	offGrid := 0
	for k, at := range d.NextFireTimes {
		nominal := first.Add(time.Duration(k) * time.Minute)
		if at.Before(nominal) || at.After(nominal.Add(30*time.Second)) {
			t.Fatalf("fire time %d at %v, want within 30s after %v", k, at, nominal)
		}
		if !at.Equal(nominal) {
			offGrid++
		}
	}
	if offGrid == 0 {
		t.Fatalf("no fire time moved by the jitter: %v", d.NextFireTimes)
	}
	_, err = b.c.Schedules(testNamespace).Create(ctx, "too-fine", client.ScheduleOptions{Queue: testQueue, Key: "k2",
		Spec: client.Every(time.Minute, first), Jitter: 500 * time.Microsecond})
	var oe *orrery.Error
	if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "jitter_micros") {
		t.Fatalf("a 500µs jitter: %v, want Validation on jitter_micros", err)
	}
}

// TestAnExpiredOccurrenceWaitsForSkipExpired: an occurrence that outlived its TimeToLive before
// it fired stops its schedule (nothing is enqueued); SkipExpired passes it, recorded "expired",
// and says how many it passed.
func TestAnExpiredOccurrenceWaitsForSkipExpired(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "stale", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Hour, time.Now().Add(-30*time.Minute)), TimeToLive: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := b.tr.EmitDue(ctx); n != 0 {
		t.Fatalf("the stopped schedule enqueued %d", n)
	}
	if d, err := h.Describe(ctx); err != nil || d.Options.Expired != 0 || len(d.LastOutcomes) != 0 {
		t.Fatalf("described %+v (%v) before the skip", d, err)
	}
	n, err := h.SkipExpired(ctx)
	if err != nil || n != 1 {
		t.Fatalf("SkipExpired: %d, %v; want 1", n, err)
	}
	d, err := h.Describe(ctx)
	if err != nil || len(d.LastOutcomes) != 1 || d.LastOutcomes[0].Outcome != "expired" || !strings.Contains(d.LastOutcomes[0].Reason, "skipped by") {
		t.Fatalf("described %+v (%v) after the skip", d, err)
	}
	if n, err := h.SkipExpired(ctx); err != nil || n != 0 {
		t.Fatalf("a second SkipExpired: %d, %v; want 0", n, err)
	}
}

// TestDescribeListsTheReplacedGenerations: an Update keeps the definition it replaced, which
// Describe lists with where it stood, newest first.
func TestDescribeListsTheReplacedGenerations(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "evolving", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Hour, time.Now().Add(time.Hour).Truncate(time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	for _, every := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
		if err := h.Update(ctx, func(o *client.ScheduleOptions) {
			o.Spec = client.Every(every, time.Now().Add(time.Hour).Truncate(time.Second))
		}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Generations) != 2 || d.Generations[0].Generation != 2 || d.Generations[1].Generation != 1 ||
		d.Generations[1].Options.Spec.GetEvery().GetIntervalMicros() != time.Hour.Microseconds() ||
		d.Generations[0].ReplacedBy != testPrincipal || d.Generations[0].ReplacedAt.IsZero() {
		t.Fatalf("generations %+v", d.Generations)
	}
}

// TestBackfillRunsAPastRangeOnce: Backfill enqueues a past range's instants now, each with its
// own id and a "backfilled" ledger record, and a second Backfill of the range enqueues none.
func TestBackfillRunsAPastRangeOnce(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	first := time.Now().Add(-5*time.Hour - 30*time.Minute).Truncate(time.Second)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "reports", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Hour, first), Misfire: client.MisfireSkip})
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.Backfill(ctx, first, time.Now())
	if err != nil || n != 6 {
		t.Fatalf("Backfill of the 6 past instants: %d, %v", n, err)
	}
	if n, err := h.Backfill(ctx, first, time.Now()); err != nil || n != 0 {
		t.Fatalf("a second Backfill: %d, %v; want 0", n, err)
	}
	d, err := h.Describe(ctx)
	if err != nil || len(d.LastOutcomes) == 0 || d.LastOutcomes[0].Outcome != "backfilled" {
		t.Fatalf("described %+v (%v)", d, err)
	}
	_, err = h.Backfill(ctx, first, time.Now().Add(time.Hour))
	var oe *orrery.Error
	if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || !strings.HasSuffix(oe.Field, "to_unix_micros") {
		t.Fatalf("a range into the future: %v, want Validation on to_unix_micros", err)
	}
}

// TestListSelectsSchedulesByLabels: schedules created with Labels are listed by a label
// selector and a name prefix, across partitions; Describe returns the labels.
func TestListSelectsSchedulesByLabels(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	schedules := b.c.Schedules(testNamespace)
	for i := range 12 {
		o := client.ScheduleOptions{Queue: testQueue, Spec: client.Every(time.Hour, time.Now().Add(time.Hour).Truncate(time.Second)),
			Labels: map[string]string{"team": []string{"billing", "search", "ops"}[i%3]}}
		name := fmt.Sprintf("job-%02d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("nightly-%02d", i)
		}
		if _, err := schedules.Create(ctx, name, o); err != nil {
			t.Fatal(err)
		}
	}
	var billing, nightlyOps []string
	for d, err := range schedules.List(ctx, client.ListSchedules{Labels: map[string]string{"team": "billing"}, PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if d.Options.Labels["team"] != "billing" {
			t.Fatalf("listed %s with labels %v", d.Name, d.Options.Labels)
		}
		billing = append(billing, d.Name)
	}
	for d, err := range schedules.List(ctx, client.ListSchedules{Labels: map[string]string{"team": "ops"}, NamePrefix: "nightly-"}) {
		if err != nil {
			t.Fatal(err)
		}
		nightlyOps = append(nightlyOps, d.Name)
	}
	if len(billing) != 4 || len(nightlyOps) != 1 || nightlyOps[0] != "nightly-08" {
		t.Fatalf("team=billing listed %v; team=ops with prefix nightly- %v", billing, nightlyOps)
	}
}

// TestAPacedScheduleDescribesItsBacklog: a schedule started in the past with a pace enqueues
// its backlog at the pace, and Describe counts what is left.
func TestAPacedScheduleDescribesItsBacklog(t *testing.T) {
	b := setup(t, 2)
	ctx := ctxFor(t)
	first := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	h, err := b.c.Schedules(testNamespace).Create(ctx, "paced", client.ScheduleOptions{Queue: testQueue, Key: "k",
		Spec: client.Every(time.Minute, first), CatchUpWindow: time.Hour, PacePerWindow: 5, PaceWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.tr.EmitDue(ctx); err != nil || n != 5 {
		t.Fatalf("EmitDue: %d, %v; want the pace's 5", n, err)
	}
	d, err := h.Describe(ctx)
	if err != nil || d.Options.PacePerWindow != 5 || d.Options.PaceWindow != time.Hour || d.Backlog < 25 {
		t.Fatalf("described %+v (%v): want the pace and a backlog of the other 26 or so", d, err)
	}
}
