package cluster

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/asynkron/protoactor-go/remote"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/input"
)

// CheckLimits returns a Validation error naming the limits when the largest command or reply
// they allow would not fit in the actor transport's largest message (input.MaxMessageBytes).
func CheckLimits(lim input.Limits) error {
	if n := lim.MaxCommandBytes(); n > input.MaxMessageBytes {
		return orrery.Invalid("limits", "allow a command of %d bytes (max_mutations_per_batch %d × (max_state_bytes %d + max_payload_bytes %d + max_headers_bytes %d + %d) + %d), more than the actor transport's largest message of %d bytes",
			n, lim.MaxMutationsPerBatch, lim.MaxStateBytes, lim.MaxPayloadBytes, lim.MaxHeadersBytes, input.MutationOverheadBytes, input.EnvelopeOverheadBytes, input.MaxMessageBytes)
	}
	if n := lim.MaxReplyBytes(); n > input.MaxMessageBytes {
		return orrery.Invalid("limits", "allow a reply of %d bytes (max_mutations_per_batch %d × (max_receive_bytes_per_command %d + max_payload_bytes %d + max_headers_bytes %d + max_receive_per_command %d × %d) + %d), more than the actor transport's largest message of %d bytes",
			n, lim.MaxMutationsPerBatch, lim.MaxReceiveBytesPerCommand, lim.MaxPayloadBytes, lim.MaxHeadersBytes, lim.MaxReceivePerCommand, input.MessageOverheadBytes, input.EnvelopeOverheadBytes, input.MaxMessageBytes)
	}
	return nil
}

// endpointWriterQueueSize is the initial length of the send queue protoactor keeps for each
// peer it writes to (silo or client). The queue doubles when full, so this bounds nothing; it
// is only what each connection allocates up front. protoactor's default, 1,000,000 slots of
// 16 bytes, costs 16 MB of heap per peer on every silo and client.
const endpointWriterQueueSize = 1024

// remoteOptions set the gRPC message limits of both ends of the actor transport to
// input.MaxMessageBytes, its security: mutual TLS with creds (transportauth), or none when creds
// is nil (either way the server refuses protoactor's unimplemented unary methods), and a small
// initial send queue per peer (endpointWriterQueueSize).
func remoteOptions(creds *transportauth.Credentials) []remote.ConfigOption {
	server := []grpc.ServerOption{grpc.MaxRecvMsgSize(input.MaxMessageBytes), grpc.MaxSendMsgSize(input.MaxMessageBytes)}
	security := grpc.WithTransportCredentials(insecure.NewCredentials())
	if creds == nil {
		server = append(server, transportauth.RefuseUnary())
	} else {
		server = append(server, creds.ServerOptions()...)
		security = creds.DialOption()
	}
	return []remote.ConfigOption{
		remote.WithEndpointWriterQueueSize(endpointWriterQueueSize),
		remote.WithServerOptions(server...),
		remote.WithDialOptions(security, grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(input.MaxMessageBytes), grpc.MaxCallSendMsgSize(input.MaxMessageBytes))),
		remote.WithCallOptions(grpc.MaxCallRecvMsgSize(input.MaxMessageBytes), grpc.MaxCallSendMsgSize(input.MaxMessageBytes)),
	}
}
