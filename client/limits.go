package client

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
)

// Limits are the cluster's size limits on a command, which the client checks every command
// against before it sends it: a command beyond them fails at once with a Validation error
// naming the field (the same error the partition would give), nothing is sent and nothing is
// retried. Dial learns them from partition 0 (PartitionStatus.command_limits); a silo's
// in-process client takes them from its configuration.
type Limits struct {
	// MaxPayloadBytes, MaxHeadersBytes and MaxStateBytes bound payload, headers and saga
	// state JSON (input.Limits).
	MaxPayloadBytes int
	MaxHeadersBytes int
	MaxStateBytes   int
	// MaxMutationsPerBatch bounds the mutations of one command.
	MaxMutationsPerBatch int
	// MaxMessageBytes bounds the encoded CommandRequest: the actor transport's largest
	// message (input.MaxMessageBytes).
	MaxMessageBytes int
}

// DefaultLimits are the limits of a cluster of silos with input.DefaultLimits.
func DefaultLimits() Limits { return LimitsOf(input.DefaultLimits()) }

// LimitsOf returns the command limits of silos configured with lim, over the cluster's actor
// transport.
func LimitsOf(lim input.Limits) Limits {
	return Limits{
		MaxPayloadBytes: lim.MaxPayloadBytes, MaxHeadersBytes: lim.MaxHeadersBytes, MaxStateBytes: lim.MaxStateBytes,
		MaxMutationsPerBatch: lim.MaxMutationsPerBatch, MaxMessageBytes: input.MaxMessageBytes,
	}
}

// limitsOf decodes the limits a partition reports; ok is false when it reports none.
func limitsOf(reported *orreryv1.CommandLimits) (lim Limits, ok bool) {
	if reported == nil || reported.GetMaxMutationsPerBatch() == 0 || reported.GetMaxMessageBytes() == 0 {
		return Limits{}, false
	}
	return Limits{
		MaxPayloadBytes: int(reported.GetMaxPayloadBytes()), MaxHeadersBytes: int(reported.GetMaxHeadersBytes()),
		MaxStateBytes: int(reported.GetMaxStateBytes()), MaxMutationsPerBatch: int(reported.GetMaxMutationsPerBatch()),
		MaxMessageBytes: int(reported.GetMaxMessageBytes()),
	}, true
}

// input returns l as the input.Limits the partition's size checks take (the limits the
// client does not check keep their defaults).
func (l Limits) input() input.Limits {
	lim := input.DefaultLimits()
	lim.MaxPayloadBytes, lim.MaxHeadersBytes, lim.MaxStateBytes = l.MaxPayloadBytes, l.MaxHeadersBytes, l.MaxStateBytes
	lim.MaxMutationsPerBatch = l.MaxMutationsPerBatch
	return lim
}

// checkSizes checks a command against the limits before it is sent: its mutations with the
// partition's own size checks (batch.CheckSizes), then its encoding against MaxMessageBytes.
func (c *Client) checkSizes(req *orreryv1.CommandRequest) error {
	if err := batch.CheckSizes(c.limits.input(), req.GetBatch().GetMutations()); err != nil {
		return err
	}
	if n := proto.Size(req); n > c.limits.MaxMessageBytes {
		return orrery.Invalid("mutations", "encode to a command of %d bytes, more than the actor transport's largest message of %d bytes", n, c.limits.MaxMessageBytes)
	}
	return nil
}

// Limits reports the command limits the client checks before sending.
func (c *Client) Limits() Limits { return c.limits }
