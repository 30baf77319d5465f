package queue

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/record"
)

// Idempotency is what a put does with an id its lane already holds (a live message, or the
// tombstone of one removed).
type Idempotency uint8

const (
	// SameByID takes any message under a held id for the one already there: the put writes
	// nothing and reports created=false (every apply version before 18).
	SameByID Idempotency = iota
	// CompareOrReturn takes a message under a held id for the one already there only when it
	// is the same message — the same payload_json, headers_json, ordering_key and origin —
	// and fails IdempotencyConflict ("id") otherwise, naming the parts that differ. A live
	// message is compared field by field; a put that stores a message marks it compared, and
	// its tombstone keeps its MessageDigest, computed when it is removed. A tombstone without
	// a digest (its message was stored before apply version 18) matches any message. Apply
	// version 18.
	CompareOrReturn
)

// digestOf is the MessageDigest of msg's payload, headers, ordering key and origin. Its
// digests share one allocation.
func digestOf(msg *orreryv1.QueueMessage) (*orreryv1.MessageDigest, error) {
	origin, err := originBytes(msg)
	if err != nil {
		return nil, err
	}
	sums := make([]byte, 0, 4*sha256.Size)
	return &orreryv1.MessageDigest{
		PayloadSha256:     appendSHA256(&sums, []byte(msg.GetPayloadJson())),
		HeadersSha256:     appendSHA256(&sums, []byte(msg.GetHeadersJson())),
		OrderingKeySha256: appendSHA256(&sums, []byte(msg.GetOrderingKey())),
		OriginSha256:      appendSHA256(&sums, origin),
	}, nil
}

// originBytes is the deterministic encoding of msg's origin oneof (empty when it has none):
// a QueueMessage holding only the origin, so which of its kinds it is counts too.
func originBytes(msg *orreryv1.QueueMessage) ([]byte, error) {
	if msg.GetOrigin() == nil {
		return nil, nil
	}
	return record.Marshal(&orreryv1.QueueMessage{Origin: msg.GetOrigin()})
}

// appendSHA256 appends the SHA-256 of part to *sums (which has room for it) and returns it,
// or returns nil for an empty part.
func appendSHA256(sums *[]byte, part []byte) []byte {
	if len(part) == 0 {
		return nil
	}
	sum := sha256.Sum256(part)
	start := len(*sums)
	*sums = append(*sums, sum[:]...)
	return (*sums)[start:len(*sums):len(*sums)]
}

// differsFromLive names the parts (wire field names) in which msg differs from stored, the
// live message holding its id, compared field by field whenever stored was written.
func differsFromLive(stored, msg *orreryv1.QueueMessage) []string {
	var parts []string
	if stored.GetPayloadJson() != msg.GetPayloadJson() {
		parts = append(parts, "payload_json")
	}
	if stored.GetHeadersJson() != msg.GetHeadersJson() {
		parts = append(parts, "headers_json")
	}
	if stored.GetOrderingKey() != msg.GetOrderingKey() {
		parts = append(parts, "ordering_key")
	}
	if !proto.Equal(&orreryv1.QueueMessage{Origin: stored.GetOrigin()}, &orreryv1.QueueMessage{Origin: msg.GetOrigin()}) {
		parts = append(parts, "origin")
	}
	return parts
}

// differsFromDigest names the parts in which want, an incoming message's digest, differs
// from held, the digest a tombstone kept.
func differsFromDigest(held, want *orreryv1.MessageDigest) []string {
	var parts []string
	if !bytes.Equal(held.GetPayloadSha256(), want.GetPayloadSha256()) {
		parts = append(parts, "payload_json")
	}
	if !bytes.Equal(held.GetHeadersSha256(), want.GetHeadersSha256()) {
		parts = append(parts, "headers_json")
	}
	if !bytes.Equal(held.GetOrderingKeySha256(), want.GetOrderingKeySha256()) {
		parts = append(parts, "ordering_key")
	}
	if !bytes.Equal(held.GetOriginSha256(), want.GetOriginSha256()) {
		parts = append(parts, "origin")
	}
	return parts
}

// conflict is the IdempotencyConflict of an enqueue of id that differs in parts from the
// message holding id in its lane, live or (when tombstone is set) removed. It names the
// parts, never their values.
func conflict(id string, parts []string, tombstone *orreryv1.MessageTombstone) error {
	held := "the message in the lane"
	if tombstone != nil {
		how := "acked"
		switch {
		case tombstone.GetCancelled():
			how = "cancelled"
		case tombstone.GetExpired():
			how = "expired"
		}
		held = fmt.Sprintf("the message removed from the lane at %s (%s; its id stays taken until its tombstone is pruned)",
			input.FormatInstant(tombstone.GetRemovedAtUnixMicros()), how)
	}
	return orrery.FieldErrorf(orrery.CodeIdempotencyConflict, "id",
		"message %q differs from %s in its %s: an enqueue under a taken id must carry the payload_json, headers_json, ordering_key and origin the id was first enqueued with",
		id, held, strings.Join(parts, " and "))
}
