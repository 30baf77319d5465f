package input

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Per-record allowances for everything a command or reply carries besides its size-limited
// JSON documents: names (a lane is at most 512 bytes, an id, ordering key, owner or lease token
// at most 256), instants, counters and protobuf framing.
const (
	// MutationOverheadBytes bounds a mutation's encoding beyond its JSON documents.
	MutationOverheadBytes = 4 << 10
	// MessageOverheadBytes bounds a QueueMessage's encoding beyond its payload and headers.
	MessageOverheadBytes = 2 << 10
	// EnvelopeOverheadBytes bounds a CommandRequest's or CommandReply's encoding beyond its
	// mutations or results (principal, command id, error).
	EnvelopeOverheadBytes = 64 << 10
)

// MaxBytes checks that value is at most maxBytes long.
func MaxBytes(field, value string, maxBytes int) error {
	if len(value) > maxBytes {
		return orrery.Invalid(field, "is %d bytes, more than the limit of %d", len(value), maxBytes)
	}
	return nil
}

// TemplateSizes checks the size-limited documents of a message template: payload_json and
// headers_json.
func TemplateSizes(field string, t *orreryv1.MessageTemplate, lim Limits) error {
	if err := MaxBytes(field+".payload_json", t.GetPayloadJson(), lim.MaxPayloadBytes); err != nil {
		return err
	}
	return MaxBytes(field+".headers_json", t.GetHeadersJson(), lim.MaxHeadersBytes)
}

// MaxCommandBytes bounds the encoding of the largest CommandRequest that passes the size
// limits: MaxMutationsPerBatch mutations of the heaviest kind, a CompareExchangeSaga whose
// state and timeout template are all at their limits (MaxStateBytes + MaxPayloadBytes +
// MaxHeadersBytes), each with MutationOverheadBytes, plus EnvelopeOverheadBytes.
func (l Limits) MaxCommandBytes() int {
	perMutation := l.MaxStateBytes + l.MaxPayloadBytes + l.MaxHeadersBytes + MutationOverheadBytes
	return l.MaxMutationsPerBatch*perMutation + EnvelopeOverheadBytes
}

// MaxReplyBytes bounds the encoding of the largest CommandReply: MaxMutationsPerBatch
// Receive results, each leasing messages worth up to MaxReceiveBytesPerCommand plus one
// maximal message past the bound (a receive stops once the bound is spent, the first message
// always goes), with MessageOverheadBytes for each of MaxReceivePerCommand messages, plus
// EnvelopeOverheadBytes. Other results are far smaller.
func (l Limits) MaxReplyBytes() int {
	perReceive := l.MaxReceiveBytesPerCommand + l.MaxPayloadBytes + l.MaxHeadersBytes +
		int(l.MaxReceivePerCommand)*MessageOverheadBytes
	return l.MaxMutationsPerBatch*perReceive + EnvelopeOverheadBytes
}
