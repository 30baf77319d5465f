package silo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/grants"
)

// testGossipKey is a 32-byte gossip key.
var testGossipKey = []byte("0123456789abcdef0123456789abcdef")

// secure gives c every credential but the admin tokens: testGossipKey and a development CA's
// certificate for the silo ("test"), written to a temp dir with one client certificate per
// principal of clients. It returns the TLS files of each client.
func secure(t *testing.T, c *Config, clients ...string) map[string]transportauth.Files {
	t.Helper()
	dir := t.TempDir()
	if _, err := transportauth.WriteDevelopment(dir, []string{"test"}, clients, nil, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	files := transportauth.NodeFiles(dir, "silo-test")
	c.InsecureDev, c.GossipKey, c.TLSCA, c.TLSCert, c.TLSKey = false, testGossipKey, files.CA, files.Cert, files.Key
	out := map[string]transportauth.Files{}
	for _, p := range clients {
		out[p] = transportauth.NodeFiles(dir, "client-"+p)
	}
	return out
}

// TestStartRefusesASiloWithoutCredentials: without InsecureDev a configuration missing the
// admin tokens or the gossip key is refused, the error naming each missing flag; the admin
// tokens are not needed with the admin endpoint off; InsecureDev starts without any, and the
// security mode says which.
func TestStartRefusesASiloWithoutCredentials(t *testing.T) {
	tokens := []AdminToken{NewAdminToken("s3cret", "ops")}
	tls := func(c Config) Config { c.TLSCA, c.TLSCert, c.TLSKey = "ca.pem", "silo.pem", "silo-key.pem"; return c }
	for _, tc := range []struct {
		name    string
		cfg     Config
		missing []string
		mode    string
	}{
		{"none", Config{}, []string{"--admin-tokens-file", "--gossip-key-file", "--tls-ca/--tls-cert/--tls-key"}, ""},
		{"tokens only", Config{AdminTokens: tokens}, []string{"--gossip-key-file", "--tls-ca"}, ""},
		{"gossip key only", Config{GossipKey: testGossipKey}, []string{"--admin-tokens-file", "--tls-ca"}, ""},
		{"tokens and gossip key", Config{AdminTokens: tokens, GossipKey: testGossipKey}, []string{"--tls-ca"}, ""},
		{"partial TLS", Config{AdminTokens: tokens, GossipKey: testGossipKey, TLSCA: "ca.pem"}, []string{"--tls-ca/--tls-cert/--tls-key"}, ""},
		{"all", tls(Config{AdminTokens: tokens, GossipKey: testGossipKey}), nil, "tokens+gossip-key+mtls"},
		{"admin off", tls(Config{Admin: "off", GossipKey: testGossipKey}), nil, "tokens+gossip-key+mtls"},
		{"insecure dev", Config{InsecureDev: true}, nil, "INSECURE-DEV"},
		{"insecure dev with credentials", Config{InsecureDev: true, AdminTokens: tokens, GossipKey: testGossipKey}, nil, "INSECURE-DEV"},
	} {
		cfg, err := tc.cfg.withDefaults()
		if len(tc.missing) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if got := cfg.securityMode(); got != tc.mode {
				t.Errorf("%s: security %q, want %q", tc.name, got, tc.mode)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted, want the missing %v named", tc.name, tc.missing)
			continue
		}
		for _, flag := range tc.missing {
			if !strings.Contains(err.Error(), flag) {
				t.Errorf("%s: %q does not name %s", tc.name, err, flag)
			}
		}
		if !strings.Contains(err.Error(), "--insecure-dev") {
			t.Errorf("%s: %q does not mention --insecure-dev", tc.name, err)
		}
	}
	if _, err := (Config{InsecureDev: true, GossipKey: []byte("short")}).withDefaults(); err == nil || !strings.Contains(err.Error(), "gossip key") {
		t.Errorf("a 5-byte gossip key: %v", err)
	}
	bad := []AdminToken{NewAdminToken("a", "system:silo")}
	if _, err := (Config{InsecureDev: true, AdminTokens: bad}).withDefaults(); err == nil || !strings.Contains(err.Error(), "principal") {
		t.Errorf("a token for a system principal: %v", err)
	}
}

// TestParseAdminTokens: the file lists hex SHA-256 hashes and principals; bad hashes, empty or
// system principals, repeated hashes and unknown fields are refused, naming the entry.
func TestParseAdminTokens(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	hash := hex.EncodeToString(sum[:])
	tokens, err := ParseAdminTokens([]byte(`[{"principal": "ops", "sha256": "` + hash + `"}, {"principal": "ops", "sha256": "` + strings.Repeat("0", 64) + `"}]`))
	if err != nil || len(tokens) != 2 || tokens[0] != NewAdminToken("s3cret", "ops") {
		t.Fatalf("tokens %v, %v", tokens, err)
	}
	for _, tc := range []struct{ file, want string }{
		{`[{"principal": "ops", "sha256": "abc"}]`, "tokens[0].sha256"},
		{`[{"principal": "", "sha256": "` + hash + `"}]`, "principal: must not be empty"},
		{`[{"principal": "system:x", "sha256": "` + hash + `"}]`, "tokens[0].principal"},
		{`[{"principal": "a", "sha256": "` + hash + `"}, {"principal": "b", "sha256": "` + hash + `"}]`, "tokens[1].sha256"},
		{`[{"principal": "a", "token": "s3cret"}]`, "unknown field"},
	} {
		if _, err := ParseAdminTokens([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.file, err, tc.want)
		}
	}
}

// request sends method url with an Authorization header (none when empty) and decodes the
// JSON answer.
func request(t *testing.T, method, url, authorization string) (int, http.Header, map[string]any) {
	t.Helper()
	header := map[string]string{}
	if authorization != "" {
		header["Authorization"] = authorization
	}
	if method == http.MethodPost {
		code, body := post(t, url, header)
		return code, nil, body
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body
}

// TestAdminEndpointActsAsTheTokensPrincipal: on a silo with credentials (no InsecureDev), an
// admin request without a token, with a malformed or an unknown one is 401 with a challenge
// and the problem named, /metrics included; the probes and the UI's files need none; a
// request with a token acts as its principal, so grants decide: a principal lacking the
// capability is 403 and changes nothing, one holding it reads and pauses the schedule.
func TestAdminEndpointActsAsTheTokensPrincipal(t *testing.T) {
	t.Parallel()
	const namespace = "admin-auth"
	grant := func(principal string, c grants.Capability) *orreryv1.PutGrant {
		return &orreryv1.PutGrant{Principal: principal, Rules: []*orreryv1.GrantRule{{Namespace: namespace, Capabilities: uint64(c)}}}
	}
	s := startSilo(t, t.TempDir(), func(c *Config) {
		secure(t, c)
		c.AdminTokens = []AdminToken{NewAdminToken("ops-token", "ops"), NewAdminToken("viewer-token", "viewer"), NewAdminToken("nobody-token", "nobody")}
		c.Grants = []*orreryv1.PutGrant{grant("ops", grants.SchedulerManage|grants.QueuePublish|grants.QueueInspect), grant("viewer", grants.QueueInspect)}
	})
	if s.Security() != "tokens+gossip-key+mtls" {
		t.Fatalf("security %q", s.Security())
	}
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "k"}
	id := uuid.NewString()
	ops := s.Client().As("ops")
	if _, err := ops.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Minute.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	paused := func() bool {
		t.Helper()
		rec, err := ops.InspectSchedule(ctx, lane, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.GetPaused()
	}
	admin := "http://" + s.AdminAddress()
	record := admin + "/v1/schedules/" + namespace + "/jobs/k/" + id

	for _, tc := range []struct {
		name, authorization, problem string
	}{
		{"no token", "", "missing Authorization"},
		{"basic credentials", "Basic b3BzOm9wcw==", "not a bearer token"},
		{"empty bearer", "Bearer ", "not a bearer token"},
		{"unknown token", "Bearer ops-token-2", "not one of the silo's admin tokens"},
	} {
		for _, url := range []string{record, admin + "/metrics", admin + "/v1/partitions", admin + "/v1/schedules/" + namespace} {
			code, header, body := request(t, http.MethodGet, url, tc.authorization)
			errBody, _ := body["error"].(map[string]any)
			msg, _ := errBody["message"].(string)
			if code != http.StatusUnauthorized || !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(msg, tc.problem) {
				t.Errorf("%s, GET %s: %d %q %v; want 401, a Bearer challenge and %q", tc.name, url, code, header.Get("WWW-Authenticate"), body, tc.problem)
			}
		}
	}
	if code, _ := post(t, record+"/pause", map[string]string{"Authorization": "Bearer wrong"}); code != http.StatusUnauthorized || paused() {
		t.Fatalf("pause with a wrong token: %d, paused %v; want 401 and not paused", code, paused())
	}
	for _, public := range []string{"/healthz", "/readyz", "/ui/", "/ui/app.js"} {
		if code, _, _ := request(t, http.MethodGet, admin+public, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want 200", public, code)
		}
	}

	if code, _, body := request(t, http.MethodGet, record, "Bearer nobody-token"); code != http.StatusForbidden || !strings.Contains(body["error"].(map[string]any)["message"].(string), `"nobody"`) {
		t.Fatalf("GET as nobody: %d %v; want 403 naming nobody", code, body)
	}
	if code, _, body := request(t, http.MethodGet, record, "Bearer viewer-token"); code != http.StatusOK || body["record"] == nil {
		t.Fatalf("GET as viewer: %d %v; want 200 and the schedule", code, body)
	}
	if code, _, _ := request(t, http.MethodGet, admin+"/metrics", "Bearer viewer-token"); code != http.StatusOK {
		t.Fatalf("GET /metrics as viewer: %d, want 200", code)
	}
	if code, body := post(t, record+"/pause", map[string]string{"Authorization": "Bearer viewer-token"}); code != http.StatusForbidden || paused() {
		t.Fatalf("pause as viewer: %d %v, paused %v; want 403 and not paused", code, body, paused())
	}
	if code, body := post(t, record+"/pause", map[string]string{"Authorization": "bearer ops-token"}); code != http.StatusOK || !paused() {
		t.Fatalf("pause as ops: %d %v, paused %v; want 200 and paused", code, body, paused())
	}
	// The silo's own principal holds no grant here: the pause was ops's, not the silo's.
	if _, err := s.Client().InspectSchedule(ctx, lane, id); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Fatalf("the silo's own client read the schedule: %v, want Unauthorized", err)
	}
}

// TestInsecureDevAdminTokens: in InsecureDev without admin tokens a request without a token
// acts as client.DefaultPrincipal (granted everything), and a token is refused as unknown; with
// admin tokens a token is required even in InsecureDev.
func TestInsecureDevAdminTokens(t *testing.T) {
	t.Parallel()
	dev := startSilo(t, t.TempDir(), nil)
	waitReady(t, dev)
	if code, _, body := request(t, http.MethodGet, "http://"+dev.AdminAddress()+"/v1/schedules/dev", ""); code != http.StatusOK {
		t.Fatalf("a list without a token in insecure dev: %d %v", code, body)
	}
	if code, _, _ := request(t, http.MethodGet, "http://"+dev.AdminAddress()+"/v1/schedules/dev", "Bearer any"); code != http.StatusUnauthorized {
		t.Fatalf("an unknown token in insecure dev: %d, want 401", code)
	}
	withTokens := startSilo(t, t.TempDir(), func(c *Config) { c.AdminTokens = []AdminToken{NewAdminToken("dev-token", client.DefaultPrincipal)} })
	waitReady(t, withTokens)
	url := "http://" + withTokens.AdminAddress() + "/v1/schedules/dev"
	if code, _, _ := request(t, http.MethodGet, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token with admin tokens in insecure dev: %d, want 401", code)
	}
	if code, _, body := request(t, http.MethodGet, url, "Bearer dev-token"); code != http.StatusOK {
		t.Fatalf("the dev token: %d %v", code, body)
	}
}
