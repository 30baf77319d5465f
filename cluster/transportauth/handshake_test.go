package transportauth

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// credsOf issues a certificate of ca (a silo when silo is set) valid in [notBefore, notAfter]
// and returns credentials trusting trust.
func credsOf(t *testing.T, ca, trust *Authority, name string, silo bool, notBefore, notAfter time.Time) *Credentials {
	t.Helper()
	issue := ca.IssueClient
	if silo {
		issue = ca.IssueSilo
	}
	issued, err := issue(name, nil, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := issued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := New(trust.CertPEM, pair)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// handshake runs a TLS handshake between a server and a client config and returns the
// server's and the client's error (a TLS 1.3 client learns of its refusal on its first read).
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = sc.SetDeadline(deadline)
	_ = cc.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(sc, server)
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		done <- err
		if err != nil {
			sc.Close()
		}
	}()
	c := tls.Client(cc, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	return <-done, clientErr
}

// TestHandshake: the server accepts silos and clients of its CA; it refuses a client of
// another CA, an expired one, one with no certificate and one naming a system: principal. A
// client accepts a silo server and refuses a server presenting a client certificate.
func TestHandshake(t *testing.T) {
	now := time.Now()
	from, to := now.Add(-time.Hour), now.Add(time.Hour)
	ca, err := NewAuthority("ca", now.Add(-24*time.Hour), to)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewAuthority("other", from, to)
	if err != nil {
		t.Fatal(err)
	}
	silo := credsOf(t, ca, ca, "a", true, from, to)
	server := silo.serverConfig()
	system := credsOf(t, ca, ca, "x", false, from, to)
	// A system: principal cannot be loaded; present it with a config of its own.
	systemIssued, err := ca.IssueClient("system:x", nil, from, to)
	if err != nil {
		t.Fatal(err)
	}
	systemPair, err := systemIssued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	systemDial := system.ForClient().dialConfig()
	systemDial.Certificates = []tls.Certificate{systemPair}
	// A client trusting the silo's CA that presents another CA's certificate.
	foreign := credsOf(t, ca, ca, "alice", false, from, to).ForClient().dialConfig()
	foreign.Certificates = credsOf(t, other, other, "alice", false, from, to).dialConfig().Certificates
	noCert := credsOf(t, ca, ca, "alice", false, from, to).ForClient().dialConfig()
	noCert.Certificates = nil

	cases := []struct {
		name   string
		client *tls.Config
		server *tls.Config
		accept bool
	}{
		{"silo", credsOf(t, ca, ca, "b", true, from, to).dialConfig(), server, true},
		{"client", credsOf(t, ca, ca, "alice", false, from, to).ForClient().dialConfig(), server, true},
		{"another CA", foreign, server, false},
		{"expired", credsOf(t, ca, ca, "alice", false, now.Add(-2*time.Hour), now.Add(-time.Hour)).ForClient().dialConfig(), server, false},
		{"no certificate", noCert, server, false},
		{"system principal", systemDial, server, false},
		{"client server", credsOf(t, ca, ca, "alice", false, from, to).ForClient().dialConfig(),
			credsOf(t, ca, ca, "bob", false, from, to).serverConfig(), false},
		{"silo dials a client", silo.dialConfig(), credsOf(t, ca, ca, "bob", false, from, to).serverConfig(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serverErr, clientErr := handshake(t, tc.server, tc.client)
			accepted := serverErr == nil && clientErr == nil
			if accepted != tc.accept {
				t.Fatalf("accepted %v, want %v (server: %v, client: %v)", accepted, tc.accept, serverErr, clientErr)
			}
			if !accepted {
				t.Logf("server: %v; client: %v", serverErr, clientErr)
			}
		})
	}
}
