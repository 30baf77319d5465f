package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/cluster/transportauth"
)

// TestCertsWritesADevelopmentCAAndCertificates: silo certs writes a CA and one certificate per
// silo and client that load as credentials naming them, valid for a year by default.
func TestCertsWritesADevelopmentCAAndCertificates(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := runCerts([]string{"--out", dir, "--silos", "a,b", "--clients", "alice"}, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]transportauth.Identity{
		"silo-a": {Silo: "a"}, "silo-b": {Silo: "b"}, "client-alice": {Principal: "alice"},
	}
	for node, id := range want {
		creds, err := transportauth.Load(transportauth.NodeFiles(dir, node))
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		if creds.Identity() != id {
			t.Errorf("%s names %v, want %v", node, creds.Identity(), id)
		}
		if !strings.Contains(out.String(), transportauth.NodeFiles(dir, node).Cert) {
			t.Errorf("output does not list %s:\n%s", node, out.String())
		}
		leaf := creds.Leaf()
		if validity := leaf.NotAfter.Sub(time.Now()); validity < 364*24*time.Hour || validity > 366*24*time.Hour {
			t.Errorf("%s is valid for %v more, want a year", node, validity)
		}
	}
	if err := runCerts([]string{"--out", t.TempDir(), "--clients", "system:x"}, noEnv, &out); err == nil {
		t.Error("wrote a certificate for a system: principal")
	}
	if err := runCerts([]string{"--out", t.TempDir()}, noEnv, &out); err == nil {
		t.Error("wrote certificates for nobody")
	}
}
