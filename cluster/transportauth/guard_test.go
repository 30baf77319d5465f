package transportauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeStream is a server stream whose peer presents cert and that delivers batches in order.
type fakeStream struct {
	ctx     context.Context
	batches []*remote.MessageBatch
}

func newFakeStream(t *testing.T, cert *x509.Certificate, batches ...*remote.MessageBatch) *fakeStream {
	t.Helper()
	state := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	p := &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, AuthInfo: credentials.TLSInfo{State: state}}
	return &fakeStream{ctx: peer.NewContext(context.Background(), p), batches: batches}
}

func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}
func (f *fakeStream) SendMsg(any) error            { return nil }
func (f *fakeStream) RecvMsg(m any) error {
	if len(f.batches) == 0 {
		return io.EOF
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	*m.(*remote.RemoteMessage) = remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
	return nil
}

// leaf issues a certificate of the identity (silo when silo is true) and parses it.
func leaf(t *testing.T, name string, silo bool) *x509.Certificate {
	t.Helper()
	now := time.Now()
	ca, err := NewAuthority("test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	issue := ca.IssueClient
	if silo {
		issue = ca.IssueSilo
	}
	issued, err := issue(name, nil, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := issued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func envelope(t *testing.T, typeID int32, m proto.Message) *remote.MessageEnvelope {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &remote.MessageEnvelope{TypeId: typeID, MessageData: data, Target: 0, Sender: 1}
}

func batchOf(envelopes ...*remote.MessageEnvelope) *remote.MessageBatch {
	return &remote.MessageBatch{
		TypeNames: []string{commandRequestType, inspectRequestType, "orrery.v1.ScanDueRequest", activationRequestType},
		Targets:   []*actor.PID{actor.NewPID("127.0.0.1:1", "partition")},
		Senders:   []*actor.PID{actor.NewPID("127.0.0.1:2", "future")},
		Envelopes: envelopes,
	}
}

// receive runs the interceptor over stream and returns what the handler received, and the
// error that ended it.
func receive(t *testing.T, stream grpc.ServerStream) ([]*remote.MessageBatch, error) {
	t.Helper()
	var got []*remote.MessageBatch
	err := newGuard(quiet).intercept(nil, stream, &grpc.StreamServerInfo{}, func(_ any, ss grpc.ServerStream) error {
		for {
			var m remote.RemoteMessage
			if err := ss.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			got = append(got, m.GetMessageBatch())
		}
	})
	return got, err
}

func TestClientStreamCarriesTheCertificatesPrincipal(t *testing.T) {
	stream := newFakeStream(t, leaf(t, "alice", false), batchOf(
		envelope(t, 0, &orreryv1.CommandRequest{Principal: "mallory", Batch: &orreryv1.Batch{CommandId: "c1"}}),
		envelope(t, 1, &orreryv1.InspectRequest{Principal: "system:silo"}),
		envelope(t, 2, &orreryv1.ScanDueRequest{MaxRefs: 3}),
		envelope(t, 3, &orreryv1.PartitionActivationRequest{Kind: "partition", Identity: "1"}),
	))
	got, err := receive(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	envs := got[0].Envelopes
	if len(envs) != 3 {
		t.Fatalf("delivered %d envelopes, want 3 (the ScanDueRequest dropped)", len(envs))
	}
	var cmd orreryv1.CommandRequest
	var insp orreryv1.InspectRequest
	if err := proto.Unmarshal(envs[0].MessageData, &cmd); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(envs[1].MessageData, &insp); err != nil {
		t.Fatal(err)
	}
	if cmd.GetPrincipal() != "alice" || cmd.GetBatch().GetCommandId() != "c1" {
		t.Errorf("command request %v, want principal alice and command c1", &cmd)
	}
	if insp.GetPrincipal() != "alice" {
		t.Errorf("inspect request principal %q, want alice", insp.GetPrincipal())
	}
	if envs[2].TypeId != 3 {
		t.Errorf("third envelope has type %d, want the activation request", envs[2].TypeId)
	}
}

func TestSiloStreamPassesThrough(t *testing.T) {
	stream := newFakeStream(t, leaf(t, "a", true), batchOf(
		envelope(t, 0, &orreryv1.CommandRequest{Principal: "system:silo", Due: true}),
		envelope(t, 2, &orreryv1.ScanDueRequest{MaxRefs: 3}),
	))
	got, err := receive(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	var cmd orreryv1.CommandRequest
	if err := proto.Unmarshal(got[0].Envelopes[0].MessageData, &cmd); err != nil {
		t.Fatal(err)
	}
	if len(got[0].Envelopes) != 2 || cmd.GetPrincipal() != "system:silo" || !cmd.GetDue() {
		t.Errorf("silo stream altered: %d envelopes, first %v", len(got[0].Envelopes), &cmd)
	}
}

func TestClientStreamViolationsEndIt(t *testing.T) {
	cases := map[string]*remote.MessageEnvelope{
		"due command":         envelope(t, 0, &orreryv1.CommandRequest{Due: true}),
		"type out of range":   {TypeId: 9},
		"target out of range": {TypeId: 0, Target: 5},
		"json serializer":     {TypeId: 1, SerializerId: 1, MessageData: []byte("{}")},
		"undecodable":         {TypeId: 0, MessageData: []byte{0xff, 0xff}},
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := receive(t, newFakeStream(t, leaf(t, "alice", false), batchOf(e)))
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("got %v, want PermissionDenied", err)
			}
		})
	}
}

func TestIdentityOf(t *testing.T) {
	if id, err := IdentityOf(leaf(t, "a", true)); err != nil || id != (Identity{Silo: "a"}) {
		t.Errorf("silo certificate: %v %v", id, err)
	}
	if id, err := IdentityOf(leaf(t, "bob", false)); err != nil || id != (Identity{Principal: "bob"}) {
		t.Errorf("client certificate: %v %v", id, err)
	}
	if id, err := IdentityOf(&x509.Certificate{}); err == nil {
		t.Errorf("a certificate with no name is %v", id)
	}
	if id, err := IdentityOf(leaf(t, "system:x", false)); err == nil {
		t.Errorf("a system: certificate is %v", id)
	}
}
