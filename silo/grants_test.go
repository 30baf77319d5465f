package silo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestARevokedCreatorEmitsNothingUntilRestored: on a silo with a bootstrapped grant for carol
// (Config.Grants), carol's schedule is revoked before its due instant; the due coordinator's
// emit is denied and nothing is enqueued, the schedule unchanged; once the grant is put back
// (client.PutGrant, fanned out to every partition) the occurrence is emitted, once. A
// principal without a grant is refused.
func TestARevokedCreatorEmitsNothingUntilRestored(t *testing.T) {
	const namespace = "grants-test"
	carolGrant := &orreryv1.PutGrant{Principal: "carol", Rules: []*orreryv1.GrantRule{{Namespace: namespace,
		Capabilities: uint64(grants.SchedulerManage | grants.QueuePublish | grants.QueueInspect)}}}
	s := startSilo(t, t.TempDir(), func(c *Config) { c.Grants = []*orreryv1.PutGrant{carolGrant} })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(principal string) *client.Client {
		c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Principal: principal, Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	carol, nobody := dial("carol"), dial("nobody")
	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: uuid.NewString()}
	if _, err := nobody.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m"}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("a principal without a grant enqueued: %v", err)
	}

	id := uuid.NewString()
	firstDue := time.Now().Add(3 * time.Second)
	if _, err := carol.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			FirstDueAtUnixMicros: firstDue.UnixMicro(), IntervalMicros: time.Hour.Microseconds()}}}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().DeleteGrant(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	before, err := s.Client().InspectSchedule(ctx, lane, id)
	if err != nil {
		t.Fatal(err)
	}
	if before.GetNextOrdinal() != 0 {
		t.Fatalf("the schedule emitted before its creator was revoked (the revocation took past %v)", firstDue)
	}
	skipped := s.CoordinatorStats().RefsSkipped
	testkit.Eventually(t, 30*time.Second, "the coordinator's emit of the revoked schedule is denied", func() bool {
		return s.CoordinatorStats().RefsSkipped > skipped
	})
	if msgs, _, err := s.Client().InspectLane(ctx, lane, "", 10); err != nil || len(msgs) != 0 {
		t.Fatalf("lane after the due instant: %v %v, want empty", msgs, err)
	}
	after, err := s.Client().InspectSchedule(ctx, lane, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.GetRevision() != before.GetRevision() || after.GetNextOrdinal() != 0 || after.GetGeneration() != 1 {
		t.Fatalf("the denied emit moved the schedule from %v to %v", before, after)
	}

	if err := s.Client().PutGrant(ctx, carolGrant); err != nil {
		t.Fatal(err)
	}
	var msgs []*orreryv1.QueueMessage
	testkit.Eventually(t, 60*time.Second, "the occurrence is emitted once the grant is restored", func() bool {
		msgs, _, err = carol.InspectLane(ctx, lane, "", 10)
		return err == nil && len(msgs) > 0
	})
	if len(msgs) != 1 || msgs[0].GetOccurrence().GetOrdinal() != 0 {
		t.Fatalf("messages %v, want ordinal 0's occurrence once", msgs)
	}
	if rec, err := carol.InspectSchedule(ctx, lane, id); err != nil || rec.GetNextOrdinal() != 1 {
		t.Fatalf("schedule %v %v, want next ordinal 1", rec, err)
	}
}

// TestTheFounderPutsItsGrantsBeforeItIsReady: right after Start returns, the configured grants
// hold on every partition; without InsecureDev nobody else holds anything, the default
// client principal included.
func TestTheFounderPutsItsGrantsBeforeItIsReady(t *testing.T) {
	t.Parallel()
	dave := &orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "bootstrap", Capabilities: uint64(grants.QueuePublish)}}}
	var tls map[string]transportauth.Files
	s := startSilo(t, t.TempDir(), func(c *Config) {
		tls = secure(t, c, "dave", client.DefaultPrincipal)
		c.Grants, c.AdminTokens = []*orreryv1.PutGrant{dave}, []AdminToken{NewAdminToken("dave-token", "dave")}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, principal := range []string{"dave", client.DefaultPrincipal} {
		f := tls[principal]
		c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, GossipKey: testGossipKey,
			TLSCA: f.CA, TLSCert: f.Cert, TLSKey: f.Key, Options: client.Options{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for p := range 8 { // a lane on every partition
			lane := &orreryv1.Lane{Namespace: "bootstrap", Queue: "jobs", Key: uuid.NewString()}
			for route.Partition(lane, 8) != p {
				lane.Key = uuid.NewString()
			}
			_, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m"})
			if principal == "dave" && err != nil {
				t.Fatalf("dave on partition %d right after Start: %v", p, err)
			}
			if principal != "dave" && !errors.Is(err, orrery.ErrUnauthorized) {
				t.Fatalf("%s without InsecureDev on partition %d: %v, want Unauthorized", principal, p, err)
			}
		}
	}
}

func TestParseGrants(t *testing.T) {
	puts, err := ParseGrants([]byte(`[{"principal": "alice", "rules": [
		{"namespace": "*", "capabilities": ["QueueInspect"]},
		{"namespace": "acme", "queue": "jobs", "capabilities": ["SchedulerManage", "QueuePublish"],
		 "fields": [{"path": "payload.card.number", "write": true, "use": true}]}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	rules := puts[0].GetRules()
	if len(puts) != 1 || puts[0].GetPrincipal() != "alice" || len(rules) != 2 ||
		rules[0].GetCapabilities() != uint64(grants.QueueInspect) ||
		rules[1].GetCapabilities() != uint64(grants.SchedulerManage|grants.QueuePublish) ||
		rules[1].GetQueue() != "jobs" || !rules[1].GetFields()[0].GetUse() || rules[1].GetFields()[0].GetRead() {
		t.Fatalf("parsed %v", puts)
	}
	for name, bad := range map[string]string{
		"unknown capability": `[{"principal": "a", "rules": [{"namespace": "*", "capabilities": ["Root"]}]}]`,
		"unknown field":      `[{"principal": "a", "role": "admin"}]`,
		"no principal":       `[{"rules": []}]`,
		"bad path":           `[{"principal": "a", "rules": [{"namespace": "*", "fields": [{"path": "body"}]}]}]`,
		"not a list":         `{"principal": "a"}`,
	} {
		if _, err := ParseGrants([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
