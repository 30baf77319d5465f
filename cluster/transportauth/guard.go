package transportauth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// protoSerializerID is protoactor's serializer id of protobuf-encoded envelopes.
const protoSerializerID = 0

// Type names (protobuf full names, as MessageBatch.type_names carries them) of the messages a
// client sends.
var (
	commandRequestType    = string((&orreryv1.CommandRequest{}).ProtoReflect().Descriptor().FullName())
	inspectRequestType    = string((&orreryv1.InspectRequest{}).ProtoReflect().Descriptor().FullName())
	activationRequestType = string((&orreryv1.PartitionActivationRequest{}).ProtoReflect().Descriptor().FullName())
)

// ClientMessageTypes are the message types a stream authenticated by a client certificate may
// deliver.
func ClientMessageTypes() []string {
	return []string{commandRequestType, inspectRequestType, activationRequestType}
}

// guard is the stream interceptor of the package doc; it logs each dropped type once.
type guard struct {
	logger  *slog.Logger
	dropped sync.Map // type name → struct{}
}

func newGuard(logger *slog.Logger) *guard {
	if logger == nil {
		logger = slog.Default()
	}
	return &guard{logger: logger}
}

// intercept passes silo streams through and wraps client streams in a clientStream.
func (g *guard) intercept(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id, err := peerIdentity(ss.Context())
	if err != nil {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	if id.IsSilo() {
		return handler(srv, ss)
	}
	return handler(srv, &clientStream{ServerStream: ss, principal: id.Principal, guard: g})
}

// RefuseUnary is a server option refusing the actor transport's unary methods, which
// protoactor declares and does not implement (they panic, ending the process): a transport
// without TLS installs it too.
func RefuseUnary() grpc.ServerOption { return grpc.UnaryInterceptor(refuseUnary) }

// refuseUnary refuses the transport's unary methods, which protoactor does not implement.
func refuseUnary(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	return nil, status.Error(codes.Unimplemented, "the actor transport serves no unary method")
}

// peerIdentity is the identity of the verified certificate of ctx's peer.
func peerIdentity(ctx context.Context) (Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, fmt.Errorf("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Identity{}, fmt.Errorf("peer %v has no verified certificate", p.Addr)
	}
	return IdentityOf(info.State.VerifiedChains[0][0])
}

// clientStream filters and rewrites what a client-certificate stream delivers.
type clientStream struct {
	grpc.ServerStream
	principal string
	guard     *guard
}

// RecvMsg receives the next message and, for a message batch, applies the client rules.
func (s *clientStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "unexpected message %T", m)
	}
	batch := msg.GetMessageBatch()
	if batch == nil {
		return nil // connect and disconnect requests
	}
	if err := s.guard.filter(batch, s.principal); err != nil {
		return status.Errorf(codes.PermissionDenied, "client %q: %v", s.principal, err)
	}
	return nil
}

// filter drops the envelopes of batch that a client may not send, overwrites the principal of
// the ones it may, and fails on a violation (see the package doc).
func (g *guard) filter(batch *remote.MessageBatch, principal string) error {
	kept := batch.Envelopes[:0]
	for _, e := range batch.Envelopes {
		if e.TypeId < 0 || int(e.TypeId) >= len(batch.TypeNames) {
			return fmt.Errorf("type index %d out of range", e.TypeId)
		}
		if e.Target < 0 || int(e.Target) >= len(batch.Targets) {
			return fmt.Errorf("target index %d out of range", e.Target)
		}
		if e.Sender < 0 || int(e.Sender) > len(batch.Senders) {
			return fmt.Errorf("sender index %d out of range", e.Sender)
		}
		typeName := batch.TypeNames[e.TypeId]
		var err error
		switch typeName {
		case commandRequestType:
			err = rewrite(e, &orreryv1.CommandRequest{}, func(r *orreryv1.CommandRequest) error {
				if r.GetDue() {
					return fmt.Errorf("a due command is the due coordinator's")
				}
				r.Principal = principal
				return nil
			})
		case inspectRequestType:
			err = rewrite(e, &orreryv1.InspectRequest{}, func(r *orreryv1.InspectRequest) error {
				r.Principal = principal
				return nil
			})
		case activationRequestType:
			err = rewrite(e, &orreryv1.PartitionActivationRequest{}, func(*orreryv1.PartitionActivationRequest) error { return nil })
		default:
			if _, seen := g.dropped.LoadOrStore(typeName, struct{}{}); !seen {
				g.logger.Warn("transport: dropped a message type clients may not send (logged once per type)",
					"type", typeName, "principal", principal)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", typeName, err)
		}
		kept = append(kept, e)
	}
	batch.Envelopes = kept
	return nil
}

// rewrite decodes e's protobuf message into m, applies edit and re-encodes it into e.
func rewrite[M proto.Message](e *remote.MessageEnvelope, m M, edit func(M) error) error {
	if e.SerializerId != protoSerializerID {
		return fmt.Errorf("serializer %d, only protobuf (%d) is accepted", e.SerializerId, protoSerializerID)
	}
	if err := proto.Unmarshal(e.MessageData, m); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if err := edit(m); err != nil {
		return err
	}
	data, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	e.MessageData = data
	return nil
}
