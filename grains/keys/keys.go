// Package keys owns the key layout of a partition's store: one prefix per record kind, and
// codecs that keep related keys adjacent and ordered. Every string component is
// length-prefixed (uvarint), so an encoded tuple is a prefix of exactly the keys that extend
// it; instants and sequence numbers are 8-byte big-endian so byte order is time order.
//
// Prefixes (state machines):
//
//	s/  lane id        ScheduleRecord
//	st/ lane id        ScheduleTombstone
//	sh/ lane id ^generation  ScheduleGeneration (a replaced generation, newest first)
//	g/  lane id        SagaRecord
//	m/  lane id        QueueMessage (live)
//	mt/ lane id        MessageTombstone (acked or expired id, for idempotent enqueue)
//	mv/ ns queue visibleAt seq  → message key suffix (visibility index, FIFO within an instant;
//	    priority 0)
//	mv/ ns queue 0xFF p visibleAt seq → message key suffix (priority band p, 1..9; see
//	    PriorityBandPrefix: no instant's first byte is 0xFF, so every band sorts after every
//	    instant of the queue's priority-0 entries)
//	mv/ ns queue 0xFF 0xFF  → how many messages each band 1..9 holds (PriorityBandsKey; absent
//	    when all are empty)
//	lc/ lane           LaneCounters
//	qp/ ns queue       QueuePause (a paused queue, for receives)
//	mu/ lane uniqueKey UniqueRecord (the message holding a unique key in a lane)
//	mu/ 0x00 heldUntil lane uniqueKey → empty (unique records held for a period, by when
//	    they lapse, for housekeeping; a lane never begins with 0x00: its namespace is not empty)
//	qr/ ns queue       QueueRetryPolicy (a queue's retry policy, for failed releases and receives)
//	qs/ ns queue       QueueShare (a capped queue's policy, share and rate bucket)
//	qs/ ns queue leaseEnd seq → empty (the leases a share counts, by lease end)
//	d/  dueAt kind lane id → DueRef (due index)
//	i/  principal commandId → InboxEntry (command inbox)
//	ie/ expiresAt principal commandId → empty (receipts by expiry, for housekeeping)
//	ma/ removedAt lane id → empty (message tombstones by age, for housekeeping)
//	sl/ lane id ^nominal ^generation kind ^ordinal → LedgerRecord (occurrence ledger, newest
//	    nominal instant first; kind 0 recurring, 1 manual, 2 backfill)
//	sla/ recordedAt <ledger key suffix> → empty (ledger records by age, for housekeeping)
//	xs/ ns state queue key id → empty (schedules by namespace and ScheduleState, listing)
//	xg/ ns phase queue key id → empty (sagas by namespace and SagaPhase, listing)
//	pg/ principal      GrantRecord (the principal's grant in this partition)
//	au/ loggedAt principal commandId sequence → AuditRecord (audit log, oldest first)
//	zr/ zone           ZoneRules (the rules the partition evaluates the zone's cron schedules with)
//	cal/ ns name       CalendarRecord (an exclusion calendar)
//	calr/ ns name lane id → empty (the schedules of the partition that reference a calendar)
//	meta/...           partition-wide counters; meta/list-index: ListIndexProgress; meta/limits:
//	                   PartitionLimits (the limits the partition applies under)
//
// Listing by namespace (and queue) needs no index: s/ and g/ keys begin with the namespace and
// the queue. The xs/ and xg/ indexes serve lists filtered by state, so that every key such a
// list scans is one it answers with. Both orders are (queue, key, id) within a namespace, and a
// list's position (ListPosition) is that tuple, valid in either.
//
// These are a partition's keys as the state machines see them; the silo store keeps them under
// the partition's own prefix (persistence.PartitionState), beside records they never see.
package keys

import (
	"bytes"
	"encoding/binary"
	"errors"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Record prefixes.
var (
	Schedule          = []byte("s/")
	ScheduleTombstone = []byte("st/")
	ScheduleHistory   = []byte("sh/")
	Saga              = []byte("g/")
	Message           = []byte("m/")
	MessageTombstone  = []byte("mt/")
	Visibility        = []byte("mv/")
	LaneCounters      = []byte("lc/")
	QueuePause        = []byte("qp/")
	// QueueRetry holds queues' retry policies (orreryv1.QueueRetryPolicy) by namespace and queue.
	QueueRetry    = []byte("qr/")
	Due           = []byte("d/")
	Inbox         = []byte("i/")
	InboxExpiry   = []byte("ie/")
	TombstoneAge  = []byte("ma/")
	Ledger        = []byte("sl/")
	LedgerAge     = []byte("sla/")
	ScheduleIndex = []byte("xs/")
	SagaIndex     = []byte("xg/")
	Grant         = []byte("pg/")
	Audit         = []byte("au/")
	// AuditDenial indexes the audit record of a denial's window by the denial's signature
	// (audit.DenialWindow).
	AuditDenial = []byte("ad/")
	ZoneRules   = []byte("zr/")
	// Calendar holds exclusion calendars (orreryv1.CalendarRecord) by namespace and name.
	Calendar = []byte("cal/")
	// CalendarRef indexes the schedules that reference a calendar, by the calendar's namespace
	// and name, then the schedule's lane and id.
	CalendarRef = []byte("calr/")
	// Unique holds unique-key records (orreryv1.UniqueRecord) by lane and unique key, and,
	// after the byte 0x00, their lapse index (UniqueLapseKey).
	Unique = []byte("mu/")
	// QueueShare holds a capped queue's share record and, after it, the leases it counts.
	QueueShare = []byte("qs/")
	// ListIndexProgress holds how far the listing index covers the records
	// (orreryv1.ListIndexProgress).
	ListIndexProgress = []byte("meta/list-index")
	// ReceiptCount is the number of stored receipts (8-byte big-endian).
	ReceiptCount = []byte("meta/receipts")
	// AuditCount is the number of audit records written since the log was bounded
	// (8-byte big-endian; audit.MaxRecords).
	AuditCount = []byte("meta/audit-count")
	// Sequence is the partition's enqueue sequence counter (8-byte big-endian).
	Sequence = []byte("meta/sequence")
	// PartitionCounters holds the retained record count and bytes.
	PartitionCounters = []byte("meta/counters")
	// PartitionLimits holds the limits the partition applies under (orreryv1.PartitionLimits).
	PartitionLimits = []byte("meta/limits")
	// ApplyVersion holds the apply version the partition applies under
	// (orreryv1.PartitionApplyVersion).
	ApplyVersion = []byte("meta/apply-version")
)

// ListPosition is a record's place in a namespace's list order: queue, key, id.
func ListPosition(lane *orreryv1.Lane, id string) []byte {
	return AppendString(AppendString(AppendString(nil, lane.GetQueue()), lane.GetKey()), id)
}

// SplitListPosition decodes a ListPosition into its queue, key and id.
func SplitListPosition(position []byte) (queue, key, id string, err error) {
	rest := position
	if queue, rest, err = readString(rest); err != nil {
		return "", "", "", err
	}
	if key, rest, err = readString(rest); err != nil {
		return "", "", "", err
	}
	if id, rest, err = readString(rest); err != nil || len(rest) != 0 {
		return "", "", "", ErrMalformed
	}
	return queue, key, id, nil
}

// RecordListPrefix is the prefix of the records (recordPrefix Schedule or Saga) of namespace,
// or of its queue when queue is not empty; ListPositions follow it.
func RecordListPrefix(recordPrefix []byte, namespace, queue string) []byte {
	k := AppendString(Of(recordPrefix, nil), namespace)
	if queue != "" {
		k = AppendString(k, queue)
	}
	return k
}

// IndexListPrefix is the prefix of the index entries (indexPrefix ScheduleIndex or SagaIndex)
// of namespace in one state, or of its queue when queue is not empty; ListPositions follow it.
func IndexListPrefix(indexPrefix []byte, namespace string, state byte, queue string) []byte {
	k := append(AppendString(Of(indexPrefix, nil), namespace), state)
	if queue != "" {
		k = AppendString(k, queue)
	}
	return k
}

// IndexEntryKey is the index entry (indexPrefix ScheduleIndex or SagaIndex) of the record id
// in lane, listed in state.
func IndexEntryKey(indexPrefix []byte, lane *orreryv1.Lane, id string, state byte) []byte {
	return append(IndexListPrefix(indexPrefix, lane.GetNamespace(), state, ""), ListPosition(lane, id)...)
}

// ErrMalformed is returned when a key cannot be decoded.
var ErrMalformed = errors.New("keys: malformed key")

// AppendString appends a length-prefixed string.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendUint64 appends v as 8 bytes big-endian.
func AppendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// AppendLane appends namespace, queue and key.
func AppendLane(dst []byte, lane *orreryv1.Lane) []byte {
	dst = AppendString(dst, lane.GetNamespace())
	dst = AppendString(dst, lane.GetQueue())
	return AppendString(dst, lane.GetKey())
}

// LaneID is the suffix shared by all records of one id in one lane: lane, then id.
func LaneID(lane *orreryv1.Lane, id string) []byte {
	size := len(lane.GetNamespace()) + len(lane.GetQueue()) + len(lane.GetKey()) + len(id) + 4*binary.MaxVarintLen16
	return AppendString(AppendLane(make([]byte, 0, size), lane), id)
}

// keyRoom is the capacity Of leaves past prefix + suffix for what its callers append (strings,
// instants, sequences), so that building a key allocates once.
const keyRoom = 48

// Of returns prefix + suffix as a new slice, with room to append to it.
func Of(prefix, suffix []byte) []byte {
	k := make([]byte, 0, len(prefix)+len(suffix)+keyRoom)
	return append(append(k, prefix...), suffix...)
}

// ZoneRulesKey is the key of the rules the partition holds for an IANA zone.
func ZoneRulesKey(zone string) []byte { return AppendString(Of(ZoneRules, nil), zone) }

// CalendarKey is the key of calendar (namespace, name).
func CalendarKey(namespace, name string) []byte {
	return AppendString(AppendString(Of(Calendar, nil), namespace), name)
}

// CalendarNamespacePrefix is the prefix of every calendar key of namespace.
func CalendarNamespacePrefix(namespace string) []byte {
	return AppendString(Of(Calendar, nil), namespace)
}

// CalendarRefPrefix is the prefix of the references to calendar (namespace, name).
func CalendarRefPrefix(namespace, name string) []byte {
	return AppendString(AppendString(Of(CalendarRef, nil), namespace), name)
}

// CalendarRefKey is the key of the reference of the schedule at lane and id to calendar
// (lane's namespace, name).
func CalendarRefKey(name string, lane *orreryv1.Lane, id string) []byte {
	return append(CalendarRefPrefix(lane.GetNamespace(), name), LaneID(lane, id)...)
}

// SplitLaneID decodes a LaneID suffix into its lane and id.
func SplitLaneID(suffix []byte) (*orreryv1.Lane, string, error) {
	var parts [4]string
	rest := suffix
	for i := range parts {
		var err error
		if parts[i], rest, err = readString(rest); err != nil {
			return nil, "", err
		}
	}
	if len(rest) != 0 {
		return nil, "", ErrMalformed
	}
	return &orreryv1.Lane{Namespace: parts[0], Queue: parts[1], Key: parts[2]}, parts[3], nil
}

// ScheduleKey is the key of a schedule record.
func ScheduleKey(lane *orreryv1.Lane, id string) []byte { return Of(Schedule, LaneID(lane, id)) }

// ScheduleTombstoneKey is the key of a deleted schedule's tombstone.
func ScheduleTombstoneKey(lane *orreryv1.Lane, id string) []byte {
	return Of(ScheduleTombstone, LaneID(lane, id))
}

// ScheduleHistoryPrefix is the prefix of a schedule's replaced generations.
func ScheduleHistoryPrefix(lane *orreryv1.Lane, id string) []byte {
	return Of(ScheduleHistory, LaneID(lane, id))
}

// ScheduleHistoryKey is the key of a schedule's replaced generation; the generation is
// inverted, so a forward scan reads the newest first.
func ScheduleHistoryKey(lane *orreryv1.Lane, id string, generation uint64) []byte {
	return AppendUint64(ScheduleHistoryPrefix(lane, id), ^generation)
}

// SagaKey is the key of a saga record.
func SagaKey(lane *orreryv1.Lane, id string) []byte { return Of(Saga, LaneID(lane, id)) }

// MessageKey is the key of a live queue message.
func MessageKey(lane *orreryv1.Lane, id string) []byte { return Of(Message, LaneID(lane, id)) }

// MessageTombstoneKey is the key of a removed message's tombstone.
func MessageTombstoneKey(lane *orreryv1.Lane, id string) []byte {
	return Of(MessageTombstone, LaneID(lane, id))
}

// LaneCountersKey is the key of a lane's quota counters.
func LaneCountersKey(lane *orreryv1.Lane) []byte { return Of(LaneCounters, AppendLane(nil, lane)) }

// QueuePrefix is the visibility-index prefix of one queue in this partition.
func QueuePrefix(namespace, queue string) []byte {
	return AppendString(AppendString(Of(Visibility, nil), namespace), queue)
}

// QueuePauseKey is the key of queue (namespace, queue)'s pause record.
func QueuePauseKey(namespace, queue string) []byte {
	return AppendString(AppendString(Of(QueuePause, nil), namespace), queue)
}

// QueueRetryKey is the key of queue (namespace, queue)'s retry policy record.
func QueueRetryKey(namespace, queue string) []byte {
	return AppendString(AppendString(Of(QueueRetry, nil), namespace), queue)
}

// QueuePauseQueuePrefix returns the QueuePrefix of the queue whose pause record key is key, or
// false when key is not one.
func QueuePauseQueuePrefix(key []byte) ([]byte, bool) {
	if !bytes.HasPrefix(key, QueuePause) {
		return nil, false
	}
	return append(Of(Visibility, nil), key[len(QueuePause):]...), true
}

// UniqueKey is the key of the record of unique key uniqueKey in lane.
func UniqueKey(lane *orreryv1.Lane, uniqueKey string) []byte {
	return AppendString(Of(Unique, AppendLane(nil, lane)), uniqueKey)
}

// uniqueLapse is the byte after the Unique prefix that begins the lapse index: a lane's encoding
// begins with its namespace's length, never zero.
const uniqueLapse = 0x00

// UniqueLapseKey indexes the record of uniqueKey in lane, held until heldUntilMicros, by that
// instant.
func UniqueLapseKey(heldUntilMicros int64, lane *orreryv1.Lane, uniqueKey string) []byte {
	k := AppendUint64(append(Of(Unique, nil), uniqueLapse), uint64(heldUntilMicros))
	return AppendString(AppendLane(k, lane), uniqueKey)
}

// UniqueLapsePrefix is the prefix of the unique records' lapse index.
func UniqueLapsePrefix() []byte { return append(Of(Unique, nil), uniqueLapse) }

// UniqueLapseUpTo is the exclusive end of unique records that lapse at or before the instant.
func UniqueLapseUpTo(atMicros int64) []byte {
	return AppendUint64(UniqueLapsePrefix(), uint64(atMicros)+1)
}

// UniqueFromLapse returns the UniqueKey a UniqueLapseKey points at.
func UniqueFromLapse(key []byte) ([]byte, error) {
	prefix := UniqueLapsePrefix()
	if len(key) < len(prefix)+8 || !bytes.HasPrefix(key, prefix) {
		return nil, ErrMalformed
	}
	return Of(Unique, key[len(prefix)+8:]), nil
}

// QueueShareKey is the key of queue (namespace, queue)'s share record; the queue's lease
// entries (QueueLeaseKey) follow it.
func QueueShareKey(namespace, queue string) []byte {
	return AppendString(AppendString(Of(QueueShare, nil), namespace), queue)
}

// QueueLeaseKey is the entry of a lease a queue's share counts: the message of enqueue
// sequence sequence, leased until leaseEndMicros.
func QueueLeaseKey(namespace, queue string, leaseEndMicros int64, sequence uint64) []byte {
	return AppendUint64(AppendUint64(QueueShareKey(namespace, queue), uint64(leaseEndMicros)), sequence)
}

// QueueLeaseEnd decodes the lease end of a QueueLeaseKey of queue (namespace, queue).
func QueueLeaseEnd(namespace, queue string, key []byte) (int64, error) {
	n := len(QueueShareKey(namespace, queue))
	if len(key) != n+16 {
		return 0, ErrMalformed
	}
	return int64(binary.BigEndian.Uint64(key[n:])), nil
}

// QueueShareQueuePrefix returns the QueuePrefix of the queue whose share record or lease entry
// key is, or false when key is neither.
func QueueShareQueuePrefix(key []byte) ([]byte, bool) {
	if !bytes.HasPrefix(key, QueueShare) {
		return nil, false
	}
	rest := key[len(QueueShare):]
	at := 0
	for range 2 { // namespace, queue
		n, size := binary.Uvarint(rest[at:])
		if size <= 0 || uint64(len(rest)-at-size) < n {
			return nil, false
		}
		at += size + int(n)
	}
	return append(Of(Visibility, nil), rest[:at]...), true
}

// VisibilityKey orders a queue's messages by visible time, then enqueue sequence.
func VisibilityKey(namespace, queue string, visibleAtMicros int64, sequence uint64) []byte {
	k := QueuePrefix(namespace, queue)
	k = AppendUint64(k, uint64(visibleAtMicros))
	return AppendUint64(k, sequence)
}

// VisibilityQueuePrefix returns the QueuePrefix of a visibility key, or false when key is not
// one (exactly a queue prefix followed by an instant and a sequence, in priority 0 or in a
// priority band).
func VisibilityQueuePrefix(key []byte) ([]byte, bool) {
	at, ok := queuePrefixEnd(key)
	if !ok {
		return nil, false
	}
	if _, ok := bandOf(key[at:]); !ok {
		return nil, false
	}
	return key[:at], true
}

// queuePrefixEnd is the length of the QueuePrefix key begins with, or false when key does not
// begin with one.
func queuePrefixEnd(key []byte) (int, bool) {
	if !bytes.HasPrefix(key, Visibility) {
		return 0, false
	}
	at := len(Visibility)
	for range 2 { // namespace, queue
		n, size := binary.Uvarint(key[at:])
		if size <= 0 || uint64(len(key)-at-size) < n {
			return 0, false
		}
		at += size + int(n)
	}
	return at, true
}

// SplitQueuePrefix decodes the namespace and queue of a QueuePrefix.
func SplitQueuePrefix(prefix []byte) (namespace, queue string, err error) {
	if !bytes.HasPrefix(prefix, Visibility) {
		return "", "", ErrMalformed
	}
	namespace, rest, err := readString(prefix[len(Visibility):])
	if err != nil {
		return "", "", err
	}
	queue, rest, err = readString(rest)
	if err != nil || len(rest) != 0 {
		return "", "", ErrMalformed
	}
	return namespace, queue, nil
}

// VisibilityInstant decodes the visible time of a visibility key (of any priority band) within
// queuePrefix.
func VisibilityInstant(queuePrefix, key []byte) (int64, error) {
	if !bytes.HasPrefix(key, queuePrefix) {
		return 0, ErrMalformed
	}
	priority, ok := bandOf(key[len(queuePrefix):])
	if !ok {
		return 0, ErrMalformed
	}
	at := len(queuePrefix) + bandPrefixBytes(priority)
	return int64(binary.BigEndian.Uint64(key[at:])), nil
}

// DueKey orders the due index by due time, then kind, then lane and id.
func DueKey(dueAtMicros int64, kind orreryv1.DueKind, lane *orreryv1.Lane, id string) []byte {
	k := AppendUint64(Of(Due, nil), uint64(dueAtMicros))
	k = append(k, byte(kind))
	return append(k, LaneID(lane, id)...)
}

// DueUpTo is the exclusive end key of due entries with dueAt ≤ the given instant.
func DueUpTo(dueAtMicros int64) []byte {
	return AppendUint64(Of(Due, nil), uint64(dueAtMicros)+1)
}

// GrantKey is the key of a principal's grant.
func GrantKey(principal string) []byte { return AppendString(Of(Grant, nil), principal) }

// InboxKey is the key of a stored receipt.
func InboxKey(principal, commandID string) []byte {
	return AppendString(AppendString(Of(Inbox, nil), principal), commandID)
}

// InboxExpiryKey indexes a stored receipt by the instant housekeeping may remove it.
func InboxExpiryKey(expiresAtMicros int64, principal, commandID string) []byte {
	k := AppendUint64(Of(InboxExpiry, nil), uint64(expiresAtMicros))
	return AppendString(AppendString(k, principal), commandID)
}

// InboxExpiryUpTo is the exclusive end of receipts expiring at or before the instant.
func InboxExpiryUpTo(atMicros int64) []byte {
	return AppendUint64(Of(InboxExpiry, nil), uint64(atMicros)+1)
}

// AuditKey is the key of the sequence-th audit record of a command (principal, commandID)
// logged at loggedAtMicros: in time order, then by command and sequence.
func AuditKey(loggedAtMicros int64, principal, commandID string, sequence uint32) []byte {
	k := AppendString(AppendString(AppendUint64(Of(Audit, nil), uint64(loggedAtMicros)), principal), commandID)
	return binary.BigEndian.AppendUint32(k, sequence)
}

// AuditFrom is the first audit key logged at or after the instant.
func AuditFrom(atMicros int64) []byte { return AppendUint64(Of(Audit, nil), uint64(atMicros)) }

// AuditUpTo is the exclusive end of audit keys logged at or before the instant.
func AuditUpTo(atMicros int64) []byte {
	return AppendUint64(Of(Audit, nil), uint64(atMicros)+1)
}

// TombstoneAgeKey indexes a message tombstone by its removal time.
func TombstoneAgeKey(removedAtMicros int64, lane *orreryv1.Lane, id string) []byte {
	return append(AppendUint64(Of(TombstoneAge, nil), uint64(removedAtMicros)), LaneID(lane, id)...)
}

// TombstoneAgeUpTo is the exclusive end of tombstones removed at or before the instant.
func TombstoneAgeUpTo(atMicros int64) []byte {
	return AppendUint64(Of(TombstoneAge, nil), uint64(atMicros)+1)
}

// LedgerPrefix is the prefix of one schedule's ledger records.
func LedgerPrefix(lane *orreryv1.Lane, scheduleID string) []byte {
	return Of(Ledger, LaneID(lane, scheduleID))
}

// LedgerInstantKey is the first ledger key of a schedule at a nominal instant: keys run from
// the newest instant to the oldest, so those of instants at or before it follow it.
func LedgerInstantKey(lane *orreryv1.Lane, scheduleID string, nominalMicros int64) []byte {
	return AppendUint64(LedgerPrefix(lane, scheduleID), ^uint64(nominalMicros))
}

// LedgerKey is the key of the ledger record of one ordinal (or, when manual, of the manual
// occurrence triggered at nominal) of a generation. Instants, generations and ordinals are
// stored inverted, so a forward scan reads the newest first.
func LedgerKey(lane *orreryv1.Lane, scheduleID string, nominalMicros int64, generation uint64, manual bool, ordinal uint64) []byte {
	kind := LedgerRecurring
	if manual {
		kind = LedgerManual
	}
	return LedgerKeyOfKind(lane, scheduleID, nominalMicros, generation, kind, ordinal)
}

// The kinds of ledger record, the byte after the generation in a ledger key.
const (
	LedgerRecurring byte = 0
	LedgerManual    byte = 1
	LedgerBackfill  byte = 2
)

// LedgerKeyOfKind is LedgerKey for a record of the given kind.
func LedgerKeyOfKind(lane *orreryv1.Lane, scheduleID string, nominalMicros int64, generation uint64, kind byte, ordinal uint64) []byte {
	k := AppendUint64(LedgerInstantKey(lane, scheduleID, nominalMicros), ^generation)
	return AppendUint64(append(k, kind), ^ordinal)
}

// LedgerAgeKey indexes the ledger record under ledgerKey by the logged time it was written.
func LedgerAgeKey(recordedAtMicros int64, ledgerKey []byte) []byte {
	return append(AppendUint64(Of(LedgerAge, nil), uint64(recordedAtMicros)), ledgerKey[len(Ledger):]...)
}

// LedgerAgeUpTo is the exclusive end of ledger records written at or before the instant.
func LedgerAgeUpTo(atMicros int64) []byte {
	return AppendUint64(Of(LedgerAge, nil), uint64(atMicros)+1)
}

// LedgerFromAge returns the ledger key a LedgerAgeKey points at.
func LedgerFromAge(key []byte) ([]byte, error) {
	if len(key) < len(LedgerAge)+8 || string(key[:len(LedgerAge)]) != string(LedgerAge) {
		return nil, ErrMalformed
	}
	return Of(Ledger, key[len(LedgerAge)+8:]), nil
}

// SplitInboxExpiry decodes the principal and command id of an InboxExpiryKey.
func SplitInboxExpiry(key []byte) (principal, commandID string, err error) {
	rest := key[len(InboxExpiry):]
	if len(rest) < 8 {
		return "", "", ErrMalformed
	}
	rest = rest[8:]
	principal, rest, err = readString(rest)
	if err != nil {
		return "", "", err
	}
	commandID, rest, err = readString(rest)
	if err != nil || len(rest) != 0 {
		return "", "", ErrMalformed
	}
	return principal, commandID, nil
}

// TombstoneFromAge returns the MessageTombstone key a TombstoneAgeKey points at.
func TombstoneFromAge(key []byte) ([]byte, error) {
	if len(key) < len(TombstoneAge)+8 {
		return nil, ErrMalformed
	}
	return Of(MessageTombstone, key[len(TombstoneAge)+8:]), nil
}

func readString(b []byte) (string, []byte, error) {
	n, size := binary.Uvarint(b)
	if size <= 0 || uint64(len(b)-size) < n {
		return "", nil, ErrMalformed
	}
	return string(b[size : size+int(n)]), b[size+int(n):], nil
}
