package client_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/route"
)

// TestSpecHelpersTakeGoTimes: the spec helpers put Go instants and durations on the wire in
// microseconds, the unit the partition reads.
func TestSpecHelpersTakeGoTimes(t *testing.T) {
	first := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.UTC)
	every := client.Every(90*time.Minute, first).GetEvery()
	if every.GetIntervalMicros() != 5_400_000_000 || every.GetFirstDueAtUnixMicros() != first.UnixMicro() {
		t.Errorf("Every: %v", every)
	}
	if at := client.At(first).GetAt(); at.GetDueAtUnixMicros() != first.UnixMicro() {
		t.Errorf("At: %v", at)
	}
	if after := client.After(1500 * time.Millisecond).GetAfter(); after.GetDelayMicros() != 1_500_000 {
		t.Errorf("After: %v", after)
	}
	if cron := client.Cron("0 9 * * MON", "Europe/Paris").GetCron(); cron.GetExpression() != "0 9 * * MON" || cron.GetTimeZone() != "Europe/Paris" {
		t.Errorf("Cron: %v", cron)
	}
}

// TestNamedSchedulesAreAddressedByName: a schedule configured by name gets the id derived from
// its namespace and name, keeps the name on its record, and an operator who knows only the name
// pauses it without a revision.
func TestNamedSchedulesAreAddressedByName(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "reports")
	first := time.Now().Add(time.Hour)
	if _, err := b.c.ConfigureSchedule(ctx, client.NamedSchedule(l, "daily-report", client.Every(time.Hour, first), `{"report":"daily"}`), 0); err != nil {
		t.Fatal(err)
	}
	id := client.ScheduleID(testNamespace, "daily-report")
	if id != input.ScheduleIDFromName(testNamespace, "daily-report") || id == client.ScheduleID("other", "daily-report") {
		t.Fatalf("ScheduleID %s is not the namespace's derived id", id)
	}
	record, err := b.c.InspectSchedule(ctx, l, id)
	if err != nil {
		t.Fatal(err)
	}
	if record.GetDefinition().GetName() != "daily-report" {
		t.Errorf("record name %q", record.GetDefinition().GetName())
	}
	if got := record.GetDefinition().GetSpec().GetEvery().GetFirstDueAtUnixMicros(); got != first.UnixMicro() {
		t.Errorf("first due %d, want %d", got, first.UnixMicro())
	}
	if _, err := b.c.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: l, ScheduleId: client.ScheduleID(l.GetNamespace(), "daily-report"), AnyRevision: true}); err != nil {
		t.Fatalf("pause by name: %v", err)
	}
}

// TestPartitionOfIsWhereTheLaneLives: the exported lane → partition function is the one the
// client routes with, so a Batch built with it is accepted and one built elsewhere is not.
func TestPartitionOfIsWhereTheLaneLives(t *testing.T) {
	b := setup(t, 8)
	ctx := ctxFor(t)
	l := lane(testQueue, "k-17")
	p := b.c.PartitionOf(l)
	if p != client.PartitionOf(l, 8) || p != route.Partition(l, 8) {
		t.Fatalf("PartitionOf %d disagrees with the router", p)
	}
	enqueue := []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: l, Id: "m-1", PayloadJson: `{}`}}}}
	if _, _, err := b.c.Batch(ctx, p, enqueue); err != nil {
		t.Fatalf("batch on PartitionOf: %v", err)
	}
	if _, _, err := b.c.Batch(ctx, (p+1)%8, enqueue); !errors.Is(err, orrery.ErrValidation) {
		t.Fatalf("batch on another partition: %v", err)
	}
}

// TestWithReceiptGivesTheCompleteReceipt: a typed call returns its result, and WithReceipt
// hands over the whole receipt with its exact bytes, also when the mutation failed; a replay of
// the command id gives the same bytes.
func TestWithReceiptGivesTheCompleteReceipt(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "receipts")
	def := client.NamedSchedule(l, "r", client.Every(time.Minute, time.Now().Add(time.Hour)), "")
	var first client.Receipt
	if _, err := b.c.ConfigureSchedule(ctx, def, 0, client.WithCommandID("configure-r"), client.WithReceipt(&first)); err != nil {
		t.Fatal(err)
	}
	if first.GetCommandId() != "configure-r" || first.GetLoggedTimeUnixMicros() == 0 || len(first.GetResults()) != 1 || len(first.Bytes) == 0 {
		t.Fatalf("receipt %v (%d bytes)", first.Receipt, len(first.Bytes))
	}
	var replay client.Receipt
	if _, err := b.c.ConfigureSchedule(ctx, def, 0, client.WithCommandID("configure-r"), client.WithReceipt(&replay)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(replay.Bytes, first.Bytes) {
		t.Fatal("the replayed receipt's bytes differ")
	}
	var conflict client.Receipt
	_, err := b.c.ConfigureSchedule(ctx, def, 0, client.WithReceipt(&conflict))
	if !errors.Is(err, orrery.ErrRevisionConflict) {
		t.Fatalf("second create: %v", err)
	}
	if conflict.Receipt == nil || conflict.GetResults()[0].GetError() == nil {
		t.Fatalf("the failed call's receipt does not carry its error: %v", conflict.Receipt)
	}
}

// TestWaitingSagaCarriesItsGoDeadline: a saga built with WaitingSaga is stored with its Go
// deadline in microseconds and the timeout Timeout describes.
func TestWaitingSagaCarriesItsGoDeadline(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	l := lane(testQueue, "orders")
	deadline := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	m := client.WaitingSaga(l, client.NewID(), 0, `{"step":"pay"}`, deadline, client.Timeout("timeouts", `{"timed_out":true}`))
	if m.GetDeadlineUnixMicros() != deadline.UnixMicro() || m.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_WAITING {
		t.Fatalf("WaitingSaga built %v", m)
	}
	if _, err := b.c.CompareExchangeSaga(ctx, m); err != nil {
		t.Fatal(err)
	}
	rec, err := b.c.InspectSaga(ctx, l, m.GetSagaId())
	if err != nil {
		t.Fatal(err)
	}
	if rec.GetDeadlineUnixMicros() != deadline.UnixMicro() || rec.GetTimeout().GetQueue() != "timeouts" ||
		rec.GetTimeout().GetTemplate().GetPayloadJson() != `{"timed_out":true}` {
		t.Fatalf("saga record %v", rec)
	}
	if none := client.WaitingSaga(l, "x", 0, "", time.Time{}, nil); none.GetDeadlineUnixMicros() != 0 {
		t.Fatalf("a zero deadline became %d", none.GetDeadlineUnixMicros())
	}
}

// TestANamedScheduleWithoutANameIsRefused: NamedSchedule with an empty name is refused by
// ConfigureSchedule with a Validation error on definition.name, and nothing is sent.
func TestANamedScheduleWithoutANameIsRefused(t *testing.T) {
	b := setup(t, 1)
	before := len(b.commandCalls())
	_, err := b.c.ConfigureSchedule(ctxFor(t), client.NamedSchedule(lane("q", "k"), "", client.After(time.Minute), ""), 0)
	var oe *orrery.Error
	if !errors.As(err, &oe) || oe.Code != orrery.CodeValidation || oe.Field != "definition.name" {
		t.Fatalf("ConfigureSchedule of an unnamed NamedSchedule: %v, want Validation on definition.name", err)
	}
	if after := len(b.commandCalls()); after != before {
		t.Fatalf("%d commands sent for a refused definition", after-before)
	}
}
