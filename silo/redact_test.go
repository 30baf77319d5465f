package silo

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestAdminJSONShowsOnlyWhatTheTokensPrincipalMayRead: a canary planted in a schedule's
// template, a saga's state and timeout template and a message's payload and headers never
// appears in the admin endpoint's JSON (schedule, saga, ledger, lane page, both lists) for a
// token whose principal has no read on those fields, nor does the creator; the redacted_paths
// name what was withheld; a principal with read sees the canary. Denials of blind, a refused
// command holding the canary among them, show it neither in their errors nor in the silo's log.
func TestAdminJSONShowsOnlyWhatTheTokensPrincipalMayRead(t *testing.T) {
	t.Parallel()
	const (
		namespace = "admin-redact"
		canary    = "CANARY-5c2e"
		creator   = "creator-q7"
	)
	rule := func(c grants.Capability, fields ...*orreryv1.FieldPolicy) []*orreryv1.GrantRule {
		return []*orreryv1.GrantRule{{Namespace: namespace, Capabilities: uint64(c), Fields: fields}}
	}
	var logs testkit.Buffer
	s := startSilo(t, t.TempDir(), func(c *Config) {
		secure(t, c)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.AdminTokens = []AdminToken{NewAdminToken("blind-token", "blind"), NewAdminToken("reader-token", "reader")}
		c.Grants = []*orreryv1.PutGrant{
			{Principal: creator, Rules: rule(grants.All)},
			{Principal: "blind", Rules: rule(grants.QueueInspect, &orreryv1.FieldPolicy{Path: "payload"}, &orreryv1.FieldPolicy{Path: "headers"}, &orreryv1.FieldPolicy{Path: "state"})},
			{Principal: "reader", Rules: rule(grants.QueueInspect)},
		}
	})
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "k"}
	secret, headers := `{"card":"`+canary+`"}`, `{"x-secret":"`+canary+`"}`
	template := &orreryv1.MessageTemplate{PayloadJson: secret, HeadersJson: headers}
	c := s.Client().As(creator)
	scheduleID, sagaID := uuid.NewString(), uuid.NewString()
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: scheduleID, Template: template,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Hour.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: lane, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING,
		StateJson: secret, DeadlineUnixMicros: time.Now().Add(time.Hour).UnixMicro(), Timeout: &orreryv1.SagaTimeout{Queue: "timeouts", Template: template}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: secret, HeadersJson: headers}); err != nil {
		t.Fatal(err)
	}

	admin := "http://" + s.AdminAddress()
	urls := map[string]string{
		"schedule":       admin + "/v1/schedules/" + namespace + "/jobs/k/" + scheduleID,
		"saga":           admin + "/v1/sagas/" + namespace + "/jobs/k/" + sagaID,
		"ledger":         admin + "/v1/ledger/" + namespace + "/jobs/k/" + scheduleID,
		"lane":           admin + "/v1/lanes/" + namespace + "/jobs/k",
		"list schedules": admin + "/v1/schedules/" + namespace,
		"list sagas":     admin + "/v1/sagas/" + namespace,
	}
	get := func(url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for name, url := range urls {
		code, body := get(url, "blind-token")
		if code != http.StatusOK || strings.Contains(body, canary) || strings.Contains(body, creator) {
			t.Errorf("%s for blind: %d %s", name, code, body)
		}
		if name == "schedule" || name == "list schedules" {
			if !strings.Contains(body, `"redacted_paths":["creator","headers","payload"]`) {
				t.Errorf("%s for blind lists no redacted paths: %s", name, body)
			}
		}
		if (name == "saga" || name == "list sagas") && !strings.Contains(body, `"redacted_paths":["creator","state","timeout.headers","timeout.payload"]`) {
			t.Errorf("%s for blind lists no redacted paths: %s", name, body)
		}
		if name == "lane" && !strings.Contains(body, `"redacted_paths":["headers","payload"]`) {
			t.Errorf("lane for blind lists no redacted paths: %s", body)
		}
		code, body = get(url, "reader-token")
		if code != http.StatusOK || strings.Contains(body, creator) || (name != "ledger" && !strings.Contains(body, canary)) {
			t.Errorf("%s for reader: %d %s", name, code, body)
		}
	}
	// Denials carry no canary either, in the error or in the log (the audit logger's lines
	// included): blind may not publish, and its refused command holds the canary.
	if _, err := s.Client().As("blind").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m2", PayloadJson: secret, HeadersJson: headers}); !errors.Is(err, orrery.ErrUnauthorized) || strings.Contains(err.Error(), canary) {
		t.Errorf("blind's enqueue: %v, want Unauthorized without the canary", err)
	}
	if _, _, err := s.Client().As("blind").ListQueueStats(ctx, 0, 10); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("blind listed every queue: %v, want Unauthorized", err)
	}
	if !strings.Contains(logs.String(), "blind") {
		t.Fatalf("the silo logged no denial of blind; the log check would prove nothing:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), canary) {
		t.Errorf("the silo's log shows the canary:\n%s", logs.String())
	}
}
