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

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/internal/testkit"
)

// auditLines are the lines of logs on the audit logger.
func auditLines(logs *testkit.Buffer) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "logger=audit") && strings.Contains(line, "audit=true") {
			out = append(out, line)
		}
	}
	return out
}

// TestAuditEndpointShowsGrantChangesAndDenials: GET /v1/audit, as a principal holding
// PolicyAdmin on "*", lists a denied mutation and a grant change with who, what and when; a
// principal without it is 403; the 403, the inspection it refused and a 401 are lines on the
// audit logger and counts on /metrics.
func TestAuditEndpointShowsGrantChangesAndDenials(t *testing.T) {
	t.Parallel()
	logs := &testkit.Buffer{}
	s := startSilo(t, t.TempDir(), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.AdminTokens = []AdminToken{NewAdminToken("auditor-token", "auditor"), NewAdminToken("viewer-token", "viewer")}
		c.Grants = []*orreryv1.PutGrant{
			{Principal: "auditor", Rules: []*orreryv1.GrantRule{{Namespace: grants.AnyNamespace, Capabilities: uint64(grants.PolicyAdmin)}}},
			{Principal: "viewer", Rules: []*orreryv1.GrantRule{{Namespace: "audited", Capabilities: uint64(grants.QueueInspect)}}},
		}
	})
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const canary = "canary-7e3f"
	lane := &orreryv1.Lane{Namespace: "audited", Queue: "jobs", Key: "k"}
	if _, err := s.Client().As("mallory").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m1", PayloadJson: `{"secret":"` + canary + `"}`}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("mallory's enqueue: %v, want Unauthorized", err)
	}
	if err := s.Client().As("auditor").PutGrant(ctx, &orreryv1.PutGrant{Principal: "dave", Rules: []*orreryv1.GrantRule{{Namespace: "audited", Capabilities: uint64(grants.QueueConsume)}}}); err != nil {
		t.Fatal(err)
	}
	admin := "http://" + s.AdminAddress()

	if code, _, body := request(t, http.MethodGet, admin+"/v1/audit", "Bearer viewer-token"); code != http.StatusForbidden {
		t.Fatalf("GET /v1/audit as viewer: %d %v, want 403", code, body)
	}
	if code, _, _ := request(t, http.MethodGet, admin+"/v1/audit", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/audit without a token: %d, want 401", code)
	}
	code, _, body := request(t, http.MethodGet, admin+"/v1/audit?since=1h&max=1000", "Bearer auditor-token")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/audit as auditor: %d %v", code, body)
	}
	records, _ := body["records"].([]any)
	var denials, changes int
	for _, item := range records {
		rec := item.(map[string]any)["record"].(map[string]any)
		switch rec["kind"] {
		case "AUDIT_KIND_DENIED":
			if rec["principal"] == "mallory" && rec["mutation"] == "enqueue" && rec["namespace"] == "audited" && rec["logged_time_unix_micros"] != nil {
				denials++
			}
		case "AUDIT_KIND_GRANT_PUT":
			if rec["principal"] == "auditor" && rec["target_principal"] == "dave" && rec["new_rules"] == "audited:QueueConsume" && rec["old_rules"] == "none" {
				changes++
			}
		}
	}
	if denials != 1 || changes != 8 || body["next_after"] != nil {
		t.Fatalf("the audit page: %d denials of mallory's enqueue (want 1), %d puts of dave's grant (want one per partition, 8), next %v: %v",
			denials, changes, body["next_after"], records)
	}
	if code, _, body := request(t, http.MethodGet, admin+"/v1/audit?since=yesterday", "Bearer auditor-token"); code != http.StatusBadRequest {
		t.Fatalf("a bad since: %d %v, want 400", code, body)
	}

	lines := auditLines(logs)
	want := []string{"principal=viewer what=audit", `principal=viewer what="GET /v1/audit"`, `principal="" what="GET /v1/audit"`}
	for _, w := range want {
		found := false
		for _, line := range lines {
			found = found || (strings.Contains(line, w) && strings.Contains(line, "when="))
		}
		if !found {
			t.Errorf("no audit log line with %s and when= in %q", w, lines)
		}
	}
	if strings.Contains(logs.String(), canary) {
		t.Error("a log line carries the payload of the denied enqueue")
	}
	req, _ := http.NewRequest(http.MethodGet, admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer viewer-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, source := range []string{"admin", "inspect"} {
		counted := false
		for _, line := range strings.Split(string(metrics), "\n") {
			counted = counted || (strings.HasPrefix(line, "orrery_audit_denials_total{") && strings.Contains(line, `source="`+source+`"`) && !strings.HasSuffix(line, " 0"))
		}
		if !counted {
			t.Errorf("/metrics counts no denial of source %s", source)
		}
	}
}
