package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/silo"
)

// TestTokenAndGossipKeyReachTheSilo: against a silo with credentials (admin tokens, a gossip
// key, no --insecure-dev), the admin commands without a token are refused with the endpoint's
// 401, and pass with --token or ORRERY_TOKEN; the cluster commands fail to dial without the
// gossip key and work with --gossip-key-file (and the client certificate's --tls-* files).
func TestTokenAndGossipKeyReachTheSilo(t *testing.T) {
	const namespace = "cli-auth"
	key := []byte("0123456789abcdef0123456789abcdef")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	certs := t.TempDir()
	if _, err := transportauth.WriteDevelopment(certs, []string{"test"}, []string{client.DefaultPrincipal}, nil, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	siloTLS, cliTLS := transportauth.NodeFiles(certs, "silo-test"), transportauth.NodeFiles(certs, "client-"+client.DefaultPrincipal)
	s, err := silo.Start(ctx, silo.Config{DataDir: t.TempDir(), Admin: "127.0.0.1:0", Partitions: testPartitions, Logger: quiet,
		TLSCA: siloTLS.CA, TLSCert: siloTLS.Cert, TLSKey: siloTLS.Key,
		GossipKey: key, AdminTokens: []silo.AdminToken{silo.NewAdminToken("cli-token", "operator")},
		Grants: []*orreryv1.PutGrant{{Principal: client.DefaultPrincipal, Rules: []*orreryv1.GrantRule{{Namespace: namespace, Capabilities: uint64(grants.QueueInspect)}}}}})
	if err != nil {
		t.Fatalf("start silo: %v", err)
	}
	t.Cleanup(s.Stop)
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env map[string]string, args ...string) result {
		var stdout, stderr bytes.Buffer
		code := runEnv(args, strings.NewReader(""), &stdout, &stderr, func(k string) string { return env[k] })
		return result{code, stdout.String(), stderr.String()}
	}

	if r := run(nil, "silos", "--admin", s.AdminAddress()); r.code != 1 || !strings.Contains(r.stderr, "401") || !strings.Contains(r.stderr, "missing Authorization") {
		t.Fatalf("silos without a token: exit %d, stderr %q; want 1 and the 401", r.code, r.stderr)
	}
	if r := run(nil, "--token", "not-it", "partitions", "--admin", s.AdminAddress()); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Fatalf("partitions with a wrong token: exit %d, stderr %q; want 1 and the 401", r.code, r.stderr)
	}
	if r := run(nil, "--token", "cli-token", "silos", "--admin", s.AdminAddress()); r.code != 0 || !strings.Contains(r.stdout, s.ActorAddress()) {
		t.Fatalf("silos --token: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := run(map[string]string{"ORRERY_TOKEN": "cli-token"}, "partitions", "--admin", s.AdminAddress()); r.code != 0 {
		t.Fatalf("partitions with ORRERY_TOKEN: exit %d\nstderr %s", r.code, r.stderr)
	}

	seeds := []string{"--seeds", s.GossipAddress(), "--tls-ca", cliTLS.CA, "--tls-cert", cliTLS.Cert, "--tls-key", cliTLS.Key}
	if r := run(nil, append(seeds, "--timeout", "20s", "schedules", "list", "--namespace", namespace)...); r.code != 1 || !strings.Contains(r.stderr, "dial") {
		t.Fatalf("schedules list without the gossip key: exit %d, stderr %q; want 1 and the dial's error", r.code, r.stderr)
	}
	if r := run(nil, append(seeds, "--gossip-key-file", keyFile, "schedules", "list", "--namespace", namespace)...); r.code != 0 {
		t.Fatalf("schedules list --gossip-key-file: exit %d\nstderr %s", r.code, r.stderr)
	}
	if r := run(nil, append(seeds, "--gossip-key-file", filepath.Join(t.TempDir(), "none"), "schedules", "list", "--namespace", namespace)...); r.code != 2 || !strings.Contains(r.stderr, "gossip-key-file") {
		t.Fatalf("a missing gossip key file: exit %d, stderr %q; want 2 naming the flag", r.code, r.stderr)
	}
}
