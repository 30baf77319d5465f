package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
)

// TestDescribeShowsRedactedPaths: describe of a schedule and a saga whose template and state
// the CLI's principal may not read shows neither the canary nor, for the saga, its state, and
// names the redacted paths.
func TestDescribeShowsRedactedPaths(t *testing.T) {
	const canary = "CANARY-c11e"
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-redact", Queue: "jobs", Key: "k"}
	scheduleID, sagaID := uuid.NewString(), uuid.NewString()
	secret := `{"card":"` + canary + `","n":1}`
	configure(t, s, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Template: &orreryv1.MessageTemplate{PayloadJson: secret},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Hour.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro()}}}})
	if _, err := s.Client().CompareExchangeSaga(ctx, client.WaitingSaga(lane, sagaID, 0, secret, time.Now().Add(time.Hour), client.Timeout("jobs", secret))); err != nil {
		t.Fatal(err)
	}
	// The CLI's principal keeps every capability, without read on payloads and state.
	everything := grants.Everything(client.DefaultPrincipal).GetRules()[0]
	blind := &orreryv1.GrantRule{Namespace: lane.GetNamespace(), Capabilities: uint64(grants.QueueInspect),
		Fields: []*orreryv1.FieldPolicy{{Path: "payload.card"}, {Path: "state"}}}
	if err := s.Client().PutGrant(ctx, &orreryv1.PutGrant{Principal: client.DefaultPrincipal, Rules: []*orreryv1.GrantRule{everything, blind}}); err != nil {
		t.Fatal(err)
	}
	schedule := ok(t, s, "", "schedules", "describe", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), scheduleID)
	if strings.Contains(schedule, canary) || lineOf(schedule, "redacted", "payload.card") == "" {
		t.Errorf("schedules describe:\n%s", schedule)
	}
	saga := ok(t, s, "", "sagas", "describe", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), sagaID)
	if strings.Contains(saga, canary) || lineOf(saga, "redacted", "state, timeout.payload.card") == "" {
		t.Errorf("sagas describe:\n%s", saga)
	}
}
