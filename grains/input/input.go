// Package input owns the validation of caller input shared by every record kind — lanes, ids,
// JSON documents, message templates, instants and durations — and the Limits they are checked
// against. Every check returns a Validation error naming the offending field, before any write.
package input

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Time bounds, in Unix microseconds and microseconds.
const (
	// MaxInstantMicros is 9999-12-31T23:59:59.999999Z, the last instant Orrery accepts.
	MaxInstantMicros int64 = 253402300799999999
	// Second, Minute, Hour and Day are durations in microseconds.
	Second int64 = 1_000_000
	Minute       = 60 * Second
	Hour         = 60 * Minute
	Day          = 24 * Hour
	// MaxTimeToLiveMicros bounds message TTLs: 365 days.
	MaxTimeToLiveMicros = 365 * Day
	// MaxUniquePeriodMicros bounds how long an enqueue's unique key is held
	// (UniqueSpec.period_micros): 30 days.
	MaxUniquePeriodMicros = 30 * Day
)

// Name limits.
const (
	MaxNamespaceBytes = 128
	MaxQueueBytes     = 128
	MaxKeyBytes       = 256
	MaxIDBytes        = 256
	// MaxReasonBytes bounds the optional reason an operator gives a pause or a cancel.
	MaxReasonBytes = 512
	// MaxScheduleNameBytes bounds ScheduleDefinition.name.
	MaxScheduleNameBytes = 200
	// DeadLetterSuffix turns a queue name into its dead-letter queue's name. User queue names
	// cannot contain '$', so the two never collide.
	DeadLetterSuffix = "$dlq"
)

// Limits are the configurable bounds the state machines enforce. The zero value is not
// useful; start from DefaultLimits.
type Limits struct {
	// MaxPayloadBytes bounds a message's or template's payload JSON.
	MaxPayloadBytes int
	// MaxHeadersBytes bounds headers JSON.
	MaxHeadersBytes int
	// MaxStateBytes bounds a saga's state JSON.
	MaxStateBytes int
	// MaxLaneMessages and MaxLaneBytes are per-lane queue quotas (live messages, payload+headers
	// bytes). Exceeding them fails the enqueue with QuotaExceeded and rolls back its batch.
	MaxLaneMessages uint64
	MaxLaneBytes    uint64
	// MaxPartitionRecords and MaxPartitionRecordBytes cap retained schedule and saga records.
	MaxPartitionRecords     uint64
	MaxPartitionRecordBytes uint64
	// MaxMutationsPerBatch bounds one command.
	MaxMutationsPerBatch int
	// MaxEmitPerCommand bounds EmitOccurrences.max (docs/design.md §4: 32).
	MaxEmitPerCommand uint32
	// MaxEmitBytesPerBatch bounds the payload and header bytes the EmitOccurrences of one batch
	// enqueue together, so a command stays inside a partition transaction whatever its
	// templates weigh; the first occurrence of a batch always goes (progress), the rest of a
	// backlog stays due. The default (256 KiB) keeps a coordinator command (at most 512
	// occurrences of about 0.7 KiB of records each, plus one more maximal payload past the
	// bound) under the smallest partition transaction limit (about 0.93 MiB with staggered
	// memtables, see persistence.Options.FlushStagger).
	MaxEmitBytesPerBatch int
	// MaxPassedPerEmit bounds the ordinals one EmitOccurrences may pass without enqueuing a
	// message (missed, skipped, coalesced, buffered); the rest stay due.
	MaxPassedPerEmit uint32
	// MaxReceivePerCommand bounds Receive.max.
	MaxReceivePerCommand uint32
	// MaxReceiveBytesPerCommand bounds the payload and header bytes one Receive leases or
	// moves to the dead-letter queue; the first message always goes. A leased message is
	// written twice (its new lease, and the receipt that replays the receive), so the default
	// (128 KiB) keeps a receive of large messages inside the smallest partition transaction
	// (about 0.93 MiB) instead of failing it for good.
	MaxReceiveBytesPerCommand int
	// MaxLeaseMicros bounds a lease (docs/design.md §4: 10 minutes).
	MaxLeaseMicros int64
	// DefaultLeaseMicros is used when a Receive gives no lease duration.
	DefaultLeaseMicros int64
	// DefaultMaxDeliveries applies when a message gives none; MaxMaxDeliveries bounds it.
	DefaultMaxDeliveries uint32
	MaxMaxDeliveries     uint32
	// MaxDelayMicros bounds enqueue and release delays.
	MaxDelayMicros int64
	// ReceiptRetentionMicros is how long a command's receipt is kept for replay;
	// SystemReceiptRetentionMicros applies to principals starting with SystemPrincipalPrefix
	// (due coordinators, housekeeping), whose receipts serve only a single retry.
	ReceiptRetentionMicros       int64
	SystemReceiptRetentionMicros int64
	// MaxReceipts caps stored receipts per partition; housekeeping removes the soonest to
	// expire beyond it.
	MaxReceipts uint64
	// TombstoneRetentionMicros is how long an acked or expired message id stays taken (an
	// enqueue of the same id within it is a no-op).
	TombstoneRetentionMicros int64
	// LedgerRetentionMicros is how long an occurrence ledger record is kept after it was
	// last written; housekeeping removes older ones.
	LedgerRetentionMicros int64
	// AuditRetentionMicros is how long an audit record (package grains/audit) is kept after
	// its logged time; housekeeping removes older ones.
	AuditRetentionMicros int64
	// PriorityStepMicros is how much earlier a message of one priority more counts as visible
	// to a receive (queue.ApplyReceive): 0 is strict priority, at most MaxPriorityStepMicros.
	PriorityStepMicros int64
}

// SystemPrincipalPrefix marks Orrery's own principals: the mutations only Orrery makes need
// one (grants.RequireSystem), no grant is kept for one, and their receipts are kept briefly.
const SystemPrincipalPrefix = "system:"

// IsSystem reports whether principal is one of Orrery's own (SystemPrincipalPrefix): the one
// spelling of that check.
func IsSystem(principal string) bool { return strings.HasPrefix(principal, SystemPrincipalPrefix) }

// RefuseSystem is an Unauthorized error when principal is one of Orrery's own, which the
// caller named by who (a client, the embedder's client) may not act as; nil otherwise.
func RefuseSystem(principal, who string) error {
	if IsSystem(principal) {
		return orrery.Errorf(orrery.CodeUnauthorized, "principal: %q is one of Orrery's own principals (%s...), which %s may not act as", principal, SystemPrincipalPrefix, who)
	}
	return nil
}

// CoordinatorPrincipal is the due coordinators' principal: a partition accepts a due command
// (the only path of EmitOccurrences and ExpireSaga) from it alone.
const CoordinatorPrincipal = SystemPrincipalPrefix + "coordinator"

// DefaultLimits returns the documented defaults (README "Limits").
func DefaultLimits() Limits {
	return Limits{
		MaxPayloadBytes:           256 << 10,
		MaxHeadersBytes:           16 << 10,
		MaxStateBytes:             256 << 10,
		MaxLaneMessages:           1_000_000,
		MaxLaneBytes:              1 << 30,
		MaxPartitionRecords:       10_000_000,
		MaxPartitionRecordBytes:   8 << 30,
		MaxMutationsPerBatch:      256,
		MaxEmitPerCommand:         32,
		MaxPassedPerEmit:          1024,
		MaxEmitBytesPerBatch:      256 << 10,
		MaxReceivePerCommand:      256,
		MaxReceiveBytesPerCommand: 128 << 10,
		MaxLeaseMicros:            10 * Minute,
		DefaultLeaseMicros:        30 * Second,
		DefaultMaxDeliveries:      10,
		MaxMaxDeliveries:          1000,
		MaxDelayMicros:            365 * Day,

		ReceiptRetentionMicros:       Day,
		SystemReceiptRetentionMicros: 10 * Minute,
		MaxReceipts:                  1_000_000,
		TombstoneRetentionMicros:     Day,
		LedgerRetentionMicros:        30 * Day,
		AuditRetentionMicros:         30 * Day,
		PriorityStepMicros:           Minute,
	}
}

// OccurrenceIDPrefixes begin the ids of schedule occurrences (recurring and manual). They
// are reserved: an Enqueue may not use them, so an occurrence's id is never taken when the
// schedule enqueues it (see queue.PutFresh).
var OccurrenceIDPrefixes = []string{"recurring-", "manual-"}

// EnqueueID checks the id a client gives a message: a Name that does not begin with one of
// OccurrenceIDPrefixes.
func EnqueueID(field, value string) error {
	if err := Name(field, value, MaxIDBytes); err != nil {
		return err
	}
	for _, prefix := range OccurrenceIDPrefixes {
		if strings.HasPrefix(value, prefix) {
			return orrery.Invalid(field, "begins with %q, which is reserved for the ids of schedule occurrences", prefix)
		}
	}
	return nil
}

// Name checks a namespace, queue, key or id: non-empty, valid UTF-8, at most maxBytes, no
// control characters.
func Name(field, value string, maxBytes int) error {
	if value == "" {
		return orrery.Invalid(field, "must not be empty")
	}
	if err := MaxBytes(field, value, maxBytes); err != nil {
		return err
	}
	if !utf8.ValidString(value) {
		return orrery.Invalid(field, "is not valid UTF-8")
	}
	for i, r := range value {
		if r < 0x20 || r == 0x7f {
			return orrery.Invalid(field, "has a control character at byte %d", i)
		}
	}
	return nil
}

// Reason checks an operator's optional reason (PauseQueue, CancelMessage): empty, or a Name of
// at most MaxReasonBytes.
func Reason(field, value string) error {
	if value == "" {
		return nil
	}
	return Name(field, value, MaxReasonBytes)
}

// QueueName checks a queue name: ASCII letters, digits, '.', '_' and '-', starting with a letter
// or digit, optionally followed by the dead-letter suffix when allowDeadLetter is set.
func QueueName(field, queue string, allowDeadLetter bool) error {
	base := queue
	if allowDeadLetter {
		base = strings.TrimSuffix(queue, DeadLetterSuffix)
	}
	if err := Name(field, base, MaxQueueBytes); err != nil {
		return err
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return orrery.Invalid(field, "has %q at byte %d; queue names use letters, digits, '.', '_' and '-' and start with a letter or digit", c, i)
		}
	}
	return nil
}

// IsDeadLetterQueue reports whether a queue name is a dead-letter queue's.
func IsDeadLetterQueue(queue string) bool { return strings.HasSuffix(queue, DeadLetterSuffix) }

// Lane checks all three parts of a lane. The dead-letter suffix is allowed when
// allowDeadLetter is set (receiving from or acking in a dead-letter queue).
func Lane(field string, lane *orreryv1.Lane, allowDeadLetter bool) error {
	if lane == nil {
		return orrery.Invalid(field, "is required")
	}
	if err := Name(field+".namespace", lane.GetNamespace(), MaxNamespaceBytes); err != nil {
		return err
	}
	if err := QueueName(field+".queue", lane.GetQueue(), allowDeadLetter); err != nil {
		return err
	}
	return Name(field+".key", lane.GetKey(), MaxKeyBytes)
}

// UUID checks a lower-case canonical UUID (8-4-4-4-12 hex digits).
func UUID(field, id string) error {
	if len(id) != 36 {
		return orrery.Invalid(field, "must be a lower-case canonical UUID (36 characters), got %d characters", len(id))
	}
	for i := 0; i < 36; i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return orrery.Invalid(field, "must be a lower-case canonical UUID: expected '-' at position %d", i)
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return orrery.Invalid(field, "must be a lower-case canonical UUID: %q at position %d is not a lower-case hex digit", c, i)
			}
		}
	}
	return nil
}

// UUIDHex returns a canonical UUID's 32 hex digits (the "N" format) without hyphens.
func UUIDHex(id string) string { return strings.ReplaceAll(id, "-", "") }

// ScheduleIDNamespace is the fixed UUID of Orrery's name space for UUIDv5 schedule ids
// (ScheduleIDFromName). It never changes: every id derived from a name depends on it.
const ScheduleIDNamespace = "cd679389-9d51-4c81-9430-cceb92e6449a"

// ScheduleIDFromName derives a schedule id from a name, so users can address a schedule by
// name: the lower-case canonical UUIDv5 (RFC 9562 §5.5, SHA-1) of namespace + "\x00" + name in
// ScheduleIDNamespace. namespace is the lane namespace the name belongs to, so equal names in
// two namespaces give two ids. The partition does not require a schedule's id to be derived
// from its name.
func ScheduleIDFromName(namespace, name string) string {
	return uuidV5(ScheduleIDNamespace, namespace+"\x00"+name)
}

// ScheduleIDFromNameIncarnation is the id of the incarnation-th schedule of a name (1, 2, ...):
// a schedule's id stays terminal once it is deleted, so a name given to a new schedule after
// its previous one was deleted takes its next incarnation's id. The first is
// ScheduleIDFromName's, so schedules named before names were reusable keep their ids; each
// later one is the UUIDv5 of namespace + "\x00" + name + "\x00" + the incarnation in decimal,
// in ScheduleIDNamespace (a name holds no control character, so no other name's id is one of
// these). Zero is taken as 1. Which incarnation a name is at is the partition's to say
// (schedule.ResolveName).
func ScheduleIDFromNameIncarnation(namespace, name string, incarnation uint64) string {
	if incarnation <= 1 {
		return ScheduleIDFromName(namespace, name)
	}
	return uuidV5(ScheduleIDNamespace, namespace+"\x00"+name+"\x00"+strconv.FormatUint(incarnation, 10))
}

// SagaIDNamespace is the fixed UUID of Orrery's name space for UUIDv5 saga ids
// (SagaIDFromName). It never changes: every id derived from a name depends on it.
const SagaIDNamespace = "5d2a9c8e-3f41-4b7a-9e06-1c8d7b2f4a63"

// SagaIDFromName derives a saga id from a name (an order number, a booking reference), as
// ScheduleIDFromName does for schedules, in SagaIDNamespace: equal names give equal ids in one
// namespace and different ones across namespaces, and a saga and a schedule of one name never
// share an id. The partition does not require a saga's id to be derived from a name.
func SagaIDFromName(namespace, name string) string {
	return uuidV5(SagaIDNamespace, namespace+"\x00"+name)
}

// uuidV5 is the lower-case canonical UUIDv5 of name in the name space space (a canonical
// UUID): SHA-1 over the name space's 16 bytes and the name, version and variant bits set.
func uuidV5(space, name string) string {
	spaceBytes, _ := hex.DecodeString(UUIDHex(space)) // callers pass constants
	h := sha1.New()
	h.Write(spaceBytes)
	h.Write([]byte(name))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x50 // version 5
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var id [36]byte
	hex.Encode(id[0:8], b[0:4])
	hex.Encode(id[9:13], b[4:6])
	hex.Encode(id[14:18], b[6:8])
	hex.Encode(id[19:23], b[8:10])
	hex.Encode(id[24:36], b[10:16])
	id[8], id[13], id[18], id[23] = '-', '-', '-', '-'
	return string(id[:])
}

// JSONObject checks an optional JSON document: empty (none: proto3 cannot tell an empty
// string from an absent one), or a JSON object of at most maxBytes. Headers, and every other
// object-valued document, follow this one rule.
func JSONObject(field, doc string, maxBytes int) error {
	if doc == "" {
		return nil
	}
	if err := MaxBytes(field, doc, maxBytes); err != nil {
		return err
	}
	if !json.Valid([]byte(doc)) || strings.TrimLeft(doc, " \t\r\n")[0] != '{' {
		return orrery.Invalid(field, "must be empty or a valid JSON object")
	}
	return nil
}

// JSONValue checks an optional JSON document of any type: empty (none: proto3 cannot tell an
// empty string from an absent one; the message or record then carries the empty string), or
// valid JSON of at most maxBytes. Payloads and saga state follow this one rule.
func JSONValue(field, doc string, maxBytes int) error {
	if doc == "" {
		return nil
	}
	if err := MaxBytes(field, doc, maxBytes); err != nil {
		return err
	}
	if !json.Valid([]byte(doc)) {
		return orrery.Invalid(field, "must be empty or valid JSON")
	}
	return nil
}

// Instant checks an instant in (0, MaxInstantMicros]: after 1970-01-01T00:00:00Z (zero means
// "none" throughout the records) and at most 9999-12-31T23:59:59.999999Z. The error shows the
// instant as a time (FormatInstant), and says so when it is Go's zero time.Time.
func Instant(field string, unixMicros int64) error {
	if unixMicros <= 0 || unixMicros > MaxInstantMicros {
		return orrery.Invalid(field, "must be after 1970-01-01T00:00:00Z and at most 9999-12-31T23:59:59.999999Z, got %s", FormatInstant(unixMicros))
	}
	return nil
}

// Duration checks a duration in [minMicros, maxMicros]; the error shows them as durations
// (FormatDuration).
func Duration(field string, micros, minMicros, maxMicros int64) error {
	if micros < minMicros || micros > maxMicros {
		return orrery.Invalid(field, "must be between %s and %s, got %s", FormatDuration(minMicros), FormatDuration(maxMicros), FormatDuration(micros))
	}
	return nil
}

// zeroTimeMicros is Go's zero time.Time (0001-01-01T00:00:00Z) in µs since the epoch: what a
// client sends for an instant it left unset.
const zeroTimeMicros = -62135596800000000

// FormatInstant writes an instant of µs since the epoch for a message: as a UTC time with its
// µs ("2026-12-06T09:00:00.5Z"), noting Go's zero time.Time ("(the zero time.Time: unset?)").
func FormatInstant(unixMicros int64) string {
	at := time.UnixMicro(unixMicros).UTC().Format("2006-01-02T15:04:05.999999Z")
	if unixMicros == zeroTimeMicros {
		return at + " (the zero time.Time: unset?)"
	}
	return at
}

// FormatDuration writes a duration of µs for a message as Go writes durations ("1h30m0s",
// "-5s"), or in µs beyond what time.Duration holds.
func FormatDuration(micros int64) string {
	if micros > math.MaxInt64/1000 || micros < math.MinInt64/1000 {
		return strconv.FormatInt(micros, 10) + " µs"
	}
	return (time.Duration(micros) * time.Microsecond).String()
}

// Template checks a message template.
func Template(field string, t *orreryv1.MessageTemplate, lim Limits) error {
	if t == nil {
		return nil
	}
	if err := JSONValue(field+".payload_json", t.GetPayloadJson(), lim.MaxPayloadBytes); err != nil {
		return err
	}
	if err := JSONObject(field+".headers_json", t.GetHeadersJson(), lim.MaxHeadersBytes); err != nil {
		return err
	}
	if k := t.GetOrderingKey(); k != "" {
		if err := Name(field+".ordering_key", k, MaxKeyBytes); err != nil {
			return err
		}
	}
	if ttl := t.GetTimeToLiveMicros(); ttl != 0 {
		if err := Duration(field+".time_to_live_micros", ttl, 1, MaxTimeToLiveMicros); err != nil {
			return err
		}
	}
	if err := Priority(field+".priority", t.GetPriority()); err != nil {
		return err
	}
	if err := MaxDeliveries(field+".max_deliveries", t.GetMaxDeliveries(), lim); err != nil {
		return err
	}
	return RetryPolicy(field+".retry", t.GetRetry(), lim)
}

// MaxDeliveries checks an optional max-deliveries setting (0 means the default).
func MaxDeliveries(field string, v int32, lim Limits) error {
	if v < 0 || uint32(v) > lim.MaxMaxDeliveries {
		return orrery.Invalid(field, "must be between 0 (default) and %d, got %d", lim.MaxMaxDeliveries, v)
	}
	return nil
}

// EffectiveMaxDeliveries resolves 0 to the default.
func EffectiveMaxDeliveries(v int32, lim Limits) uint32 {
	if v <= 0 {
		return lim.DefaultMaxDeliveries
	}
	return uint32(v)
}

// AddMicros adds two instants/durations with overflow and range checking: the result must be
// a valid instant.
func AddMicros(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) || s < 0 || s > MaxInstantMicros {
		return 0, false
	}
	return s, true
}
