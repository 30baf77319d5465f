package cluster

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/asynkron/protoactor-go/remote"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/input"
)

// MaxMessageBytes is the largest gRPC message the actor transport sends or receives, on
// servers and clients alike (gRPC's own default receive limit is 4 MiB). It is the largest
// command or reply under input.DefaultLimits, rounded up to a power of two: a command of
// MaxMutationsPerBatch (256) maximal saga exchanges is input.Limits.MaxCommandBytes, about
// 133 MiB, and a reply of 256 maximal receives is input.Limits.MaxReplyBytes, about 228 MiB.
// A silo refuses to start with limits whose largest command or reply would not fit
// (CheckLimits), and a client refuses to send a command whose encoding exceeds it.
const MaxMessageBytes = 256 << 20

// CheckLimits returns a Validation error naming the limits when the largest command or reply
// they allow would not fit in MaxMessageBytes.
func CheckLimits(lim input.Limits) error {
	if n := lim.MaxCommandBytes(); n > MaxMessageBytes {
		return orrery.Invalid("limits", "allow a command of %d bytes (max_mutations_per_batch %d × (max_state_bytes %d + max_payload_bytes %d + max_headers_bytes %d + %d) + %d), more than the actor transport's largest message of %d bytes",
			n, lim.MaxMutationsPerBatch, lim.MaxStateBytes, lim.MaxPayloadBytes, lim.MaxHeadersBytes, input.MutationOverheadBytes, input.EnvelopeOverheadBytes, MaxMessageBytes)
	}
	if n := lim.MaxReplyBytes(); n > MaxMessageBytes {
		return orrery.Invalid("limits", "allow a reply of %d bytes (max_mutations_per_batch %d × (max_receive_bytes_per_command %d + max_payload_bytes %d + max_headers_bytes %d + max_receive_per_command %d × %d) + %d), more than the actor transport's largest message of %d bytes",
			n, lim.MaxMutationsPerBatch, lim.MaxReceiveBytesPerCommand, lim.MaxPayloadBytes, lim.MaxHeadersBytes, lim.MaxReceivePerCommand, input.MessageOverheadBytes, input.EnvelopeOverheadBytes, MaxMessageBytes)
	}
	return nil
}

// CommandLimits are lim's command limits as a partition reports them to clients
// (PartitionStatus.command_limits), with the transport's MaxMessageBytes.
func CommandLimits(lim input.Limits) *orreryv1.CommandLimits {
	return &orreryv1.CommandLimits{
		MaxPayloadBytes:      uint32(lim.MaxPayloadBytes),
		MaxHeadersBytes:      uint32(lim.MaxHeadersBytes),
		MaxStateBytes:        uint32(lim.MaxStateBytes),
		MaxMutationsPerBatch: uint32(lim.MaxMutationsPerBatch),
		MaxMessageBytes:      MaxMessageBytes,
	}
}

// remoteOptions set the gRPC message limits of both ends of the actor transport to
// MaxMessageBytes, and its security: mutual TLS with creds (transportauth), or none when creds
// is nil. Either way the server refuses protoactor's unimplemented unary methods.
func remoteOptions(creds *transportauth.Credentials) []remote.ConfigOption {
	server := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
	security := grpc.WithTransportCredentials(insecure.NewCredentials())
	if creds == nil {
		server = append(server, transportauth.RefuseUnary())
	} else {
		server = append(server, creds.ServerOptions()...)
		security = creds.DialOption()
	}
	return []remote.ConfigOption{
		remote.WithServerOptions(server...),
		remote.WithDialOptions(security, grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))),
		remote.WithCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}
}
