package silo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/cluster/lookup"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/grants"
)

// testCA is a CA whose certificates a test writes into dir.
type testCA struct {
	t   *testing.T
	ca  *transportauth.Authority
	dir string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	now := time.Now()
	ca, err := transportauth.NewAuthority("test CA", now.Add(-24*time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, ca: ca, dir: dir}
}

// write stores issued as <name>.pem and <name>-key.pem and returns the files with the CA's.
func (c *testCA) write(name string, issued transportauth.Issued, err error) transportauth.Files {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
	f := transportauth.Files{CA: filepath.Join(c.dir, "ca.pem"), Cert: filepath.Join(c.dir, name+".pem"), Key: filepath.Join(c.dir, name+"-key.pem")}
	if err := os.WriteFile(f.Cert, issued.CertPEM, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(f.Key, issued.KeyPEM, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *testCA) silo(name string) transportauth.Files {
	now := time.Now()
	issued, err := c.ca.IssueSilo(name, nil, now.Add(-time.Hour), now.Add(time.Hour))
	return c.write("silo-"+name, issued, err)
}

func (c *testCA) client(principal string, notBefore, notAfter time.Time) transportauth.Files {
	issued, err := c.ca.IssueClient(principal, nil, notBefore, notAfter)
	return c.write("client-"+principal, issued, err)
}

func (c *testCA) validClient(principal string) transportauth.Files {
	now := time.Now()
	return c.client(principal, now.Add(-time.Hour), now.Add(time.Hour))
}

func withTLS(f transportauth.Files) func(*Config) {
	return func(c *Config) { c.TLSCA, c.TLSCert, c.TLSKey = f.CA, f.Cert, f.Key }
}

// rawTLSClient joins s's cluster with files and sends requests carrying principal, bypassing
// Dial (which would put the certificate's principal in them itself).
func rawTLSClient(t *testing.T, s *Silo, files transportauth.Files, principal string) *client.Client {
	t.Helper()
	creds, err := transportauth.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, provider, err := cluster.NewClient(ctx, cluster.MemberConfig{
		Name: DefaultClusterName, Logger: quiet, JoinTimeout: 10 * time.Second, TLS: creds,
		Gossip:         cluster.ProviderConfig{BindHost: "127.0.0.1", Seeds: []string{s.GossipAddress()}, Logger: quiet},
		IdentityLookup: lookup.New(lookup.Config{Kind: cluster.PartitionKind, Logger: quiet}),
	})
	if err != nil {
		t.Fatal(err)
	}
	transport := cluster.NewPartitionTransport(c, s.cfg.Partitions, 2*time.Second)
	t.Cleanup(func() {
		_ = transport.Close()
		_ = cluster.Shutdown(c, provider, false)
	})
	return client.New(transport, client.Options{Principal: principal, Logger: quiet, Limits: new(client.DefaultLimits())})
}

// dialTLS dials s with files (none: no TLS), with the partition count and limits given so that
// Dial sends nothing itself; calls give up after maxAttempts (0: at their deadline).
func dialTLS(t *testing.T, s *Silo, files transportauth.Files, principal string, maxAttempts int) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Partitions: s.cfg.Partitions,
		TLSCA: files.CA, TLSCert: files.Cert, TLSKey: files.Key,
		AttemptTimeout: 2 * time.Second,
		Options: client.Options{Principal: principal, Logger: quiet, Limits: new(client.DefaultLimits()),
			Retry: client.RetryPolicy{MaxAttempts: maxAttempts}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func everySchedule(lane *orreryv1.Lane, id string) *orreryv1.ScheduleDefinition {
	return &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{
			FirstDueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro(), IntervalMicros: time.Hour.Microseconds()}}}}
}

// TestTLSClientActsAsItsCertificatesPrincipal: on a silo with mutual TLS, a client reaches the
// partitions with a certificate of the CA and acts as the principal it names, whatever its
// requests carry. alice (granted) records herself as the creator while her requests say
// "bob"; bob (no grant) is refused while his say "anonymous", which the development grants
// (InsecureDev) allow everything.
func TestTLSClientActsAsItsCertificatesPrincipal(t *testing.T) {
	t.Parallel()
	const namespace = "tls-test"
	ca := newTestCA(t)
	aliceGrant := &orreryv1.PutGrant{Principal: "alice", Rules: []*orreryv1.GrantRule{{Namespace: namespace,
		Capabilities: uint64(grants.SchedulerManage | grants.QueuePublish | grants.QueueInspect)}}}
	s := startSilo(t, t.TempDir(), func(c *Config) {
		withTLS(ca.silo("a"))(c)
		c.Grants = []*orreryv1.PutGrant{aliceGrant}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	aliceFiles, bobFiles := ca.validClient("alice"), ca.validClient("bob")

	lane := &orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: uuid.NewString()}
	alice := rawTLSClient(t, s, aliceFiles, "bob")
	id := uuid.NewString()
	if _, err := alice.ConfigureSchedule(ctx, everySchedule(lane, id), 0); err != nil {
		t.Fatalf("alice configures a schedule: %v", err)
	}
	record, err := s.Client().InspectSchedule(ctx, lane, id)
	if err != nil {
		t.Fatal(err)
	}
	if record.GetCreator() != "alice" {
		t.Errorf("creator %q, want alice (the certificate's principal, not the request's bob)", record.GetCreator())
	}

	bob := rawTLSClient(t, s, bobFiles, client.DefaultPrincipal)
	if _, err := bob.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m"}); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("bob's enqueue as %q: %v, want Unauthorized", client.DefaultPrincipal, err)
	}
	if _, err := bob.InspectSchedule(ctx, lane, id); !errors.Is(err, orrery.ErrUnauthorized) {
		t.Errorf("bob's inspection as %q: %v, want Unauthorized", client.DefaultPrincipal, err)
	}

	dialed := dialTLS(t, s, aliceFiles, "bob", 0)
	if dialed.Principal() != "alice" {
		t.Errorf("dialed client's principal %q, want alice", dialed.Principal())
	}
	if _, err := dialed.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m"}); err != nil {
		t.Errorf("dialed alice enqueues: %v", err)
	}
	// As cannot make a certificate's client act as someone else: it says so instead of
	// silently acting as alice.
	_, err = dialed.As("ops").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m2"})
	if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), `certificate of principal "alice"`) {
		t.Errorf("As(ops) of alice's dialed client enqueues: %v, want Validation naming the certificate's principal", err)
	}
	if _, err := dialed.As("alice").Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m3"}); err != nil {
		t.Errorf("As(alice) of alice's dialed client enqueues: %v", err)
	}
}

// TestTLSRefusesClientsWithoutAValidCertificate: a client with a certificate of another CA or
// an expired certificate joins the gossip but every call fails Unavailable within its
// deadline: the silo refuses the connection. A client with no certificate is refused by Dial
// at once, which learns from the gossip that the silos require mutual TLS, and one with a
// certificate naming a system: principal by Dial too.
func TestTLSRefusesClientsWithoutAValidCertificate(t *testing.T) {
	ca := newTestCA(t)
	s := startSilo(t, t.TempDir(), withTLS(ca.silo("a")))
	other := newTestCA(t)
	now := time.Now()
	cases := map[string]transportauth.Files{
		"another CA": other.validClient("alice"),
		"expired":    ca.client("alice", now.Add(-2*time.Hour), now.Add(-time.Hour)),
	}
	for name, files := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialTLS(t, s, files, "", 2)
			start := time.Now()
			_, err := c.Enqueue(context.Background(), &orreryv1.Enqueue{Lane: &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "k"}, Id: "m"})
			took := time.Since(start)
			if !errors.Is(err, orrery.ErrUnavailable) {
				t.Fatalf("enqueue: %v, want Unavailable", err)
			}
			if took > 15*time.Second {
				t.Errorf("the refused call took %v with 2 attempts of 2 s", took)
			}
		})
	}
	start := time.Now()
	dialCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // before the fix Dial waited for its context
	defer cancel()
	_, err := client.Dial(dialCtx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Logger: quiet}})
	if !errors.Is(err, orrery.ErrValidation) || !strings.Contains(err.Error(), "require mutual TLS") || !strings.Contains(err.Error(), "TLSCert") {
		t.Errorf("dial without a certificate: %v, want Validation saying the silos require mutual TLS and what to pass", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("dial without a certificate took %v to fail", took)
	}
	// A client certificate naming a system: principal is refused by the client itself (and by
	// every silo in the handshake: transportauth's TestHandshake).
	system := ca.validClient("system:x")
	_, err = client.Dial(context.Background(), client.DialConfig{Seeds: []string{s.GossipAddress()},
		TLSCA: system.CA, TLSCert: system.Cert, TLSKey: system.Key, Options: client.Options{Logger: quiet}})
	if !errors.Is(err, orrery.ErrValidation) {
		t.Errorf("dial with a system:x certificate: %v, want Validation", err)
	}
}

// TestTLSFoundersFormAClusterAndAnswerEveryPartition: three silos with their own certificates
// of one CA form a cluster over mutual TLS (Raft, placement and requests between silos) and a
// client with a certificate answers through every partition.
func TestTLSFoundersFormAClusterAndAnswerEveryPartition(t *testing.T) {
	t.Parallel()
	const partitions = 4
	ca := newTestCA(t)
	files := map[int]transportauth.Files{}
	for i := range 3 {
		files[i] = ca.silo(fmt.Sprint(i))
	}
	next := make(chan transportauth.Files, 3)
	for i := range 3 {
		next <- files[i]
	}
	silos := startFounders(t, 3, partitions, func(c *Config) { withTLS(<-next)(c) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dialTLS(t, silos[0], ca.validClient(client.DefaultPrincipal), "", 0)
	for p := range partitions {
		if _, err := c.PartitionStatus(ctx, p); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
	for _, s := range silos {
		if _, err := s.Client().PartitionStatus(ctx, partitions-1); err != nil {
			t.Fatalf("silo %s: %v", s.ID(), err)
		}
	}
}

// TestTransportRefusesUnaryMethods: protoactor declares unary methods on the actor transport
// and panics in them, which would end the silo's process; the silo refuses them.
func TestTransportRefusesUnaryMethods(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	conn, err := grpc.Dial(s.ActorAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = remote.NewRemotingClient(conn).ListProcesses(ctx, &remote.ListProcessesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
}
