package queue

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Unique jobs (Enqueue.unique, apply version 21). A message enqueued with a UniqueSpec takes its
// unique key in its lane: the record mu/<lane>/<key> (UniqueRecord) names it and says how long
// the key is held. While the key is held, an enqueue with the same key in the lane stores
// nothing and reports the holder (EnqueueResult.duplicate_of). A key held while its message is
// live (period 0) is released when the message leaves the lane by any path (removeLive); a key
// held for a period stays taken until the period passes, whatever becomes of the message, and
// Housekeep removes its record after that (PruneUniques).

// uniqueClaim is an enqueue's resolved unique key and the instant it would be held until (0:
// while the message is live).
type uniqueClaim struct {
	key             string
	heldUntilMicros int64
}

// resolveUnique checks an enqueue's UniqueSpec (fields named relative to the enqueue) and
// resolves its key: the caller's, or the hex SHA-256 of payloadJSON, a zero byte and
// headersJSON for by_payload.
func resolveUnique(spec *orreryv1.UniqueSpec, payloadJSON, headersJSON string, loggedNowMicros int64) (uniqueClaim, error) {
	var claim uniqueClaim
	switch {
	case spec.GetByPayload() && spec.GetKey() != "":
		return claim, orrery.Invalid("unique", "sets both key and by_payload: set exactly one")
	case spec.GetByPayload():
		claim.key = PayloadUniqueKey(payloadJSON, headersJSON)
	case spec.GetKey() == "":
		return claim, orrery.Invalid("unique.key", "must not be empty: set a key, or by_payload")
	default:
		if err := input.Name("unique.key", spec.GetKey(), input.MaxIDBytes); err != nil {
			return claim, err
		}
		claim.key = spec.GetKey()
	}
	if period := spec.GetPeriodMicros(); period != 0 {
		if err := input.Duration("unique.period_micros", period, 1, input.MaxUniquePeriodMicros); err != nil {
			return claim, err
		}
		var ok bool
		if claim.heldUntilMicros, ok = input.AddMicros(loggedNowMicros, period); !ok {
			return claim, orrery.Invalid("unique.period_micros", "ends after the last accepted instant")
		}
	}
	return claim, nil
}

// PayloadUniqueKey is the unique key UniqueSpec.by_payload resolves to: the lower-case hex
// SHA-256 of payloadJSON, a zero byte and headersJSON (JSON holds no zero byte, so no two
// pairs share the input).
func PayloadUniqueKey(payloadJSON, headersJSON string) string {
	h := sha256.New()
	h.Write([]byte(payloadJSON))
	h.Write([]byte{0})
	h.Write([]byte(headersJSON))
	return hex.EncodeToString(h.Sum(nil))
}

// putUnique is PutAs for an enqueue that carries a unique claim: the id rules first (an id the
// lane holds is answered as without the claim); then, if the lane's record of the key is in
// force (uniqueHolder), nothing is stored and the result names its holder; otherwise msg is
// stored and takes the key, replacing a record no longer in force.
func putUnique(v kv.View, lim input.Limits, msg *orreryv1.QueueMessage, claim uniqueClaim, idempotency Idempotency) (*orreryv1.EnqueueResult, error) {
	res := &orreryv1.EnqueueResult{Id: msg.GetId()}
	held, err := idHeld(v, msg, idempotency)
	if err != nil || held {
		return res, err
	}
	lane := msg.GetLane()
	holder, previous, err := uniqueHolder(v, lane, claim.key, msg.GetEnqueuedAtUnixMicros())
	if err != nil {
		return nil, err
	}
	if holder != "" {
		res.DuplicateOf = holder
		return res, nil
	}
	msg.UniqueKey = claim.key
	if idempotency == CompareOrReturn {
		msg.Compared = true
	}
	if err := store(v, lim, msg, true); err != nil {
		return nil, err
	}
	if previous != nil && previous.GetHeldUntilUnixMicros() != 0 {
		if err := v.Delete(keys.UniqueLapseKey(previous.GetHeldUntilUnixMicros(), lane, claim.key)); err != nil {
			return nil, err
		}
	}
	if _, err := record.Store(v, keys.UniqueKey(lane, claim.key), &orreryv1.UniqueRecord{MessageId: msg.GetId(), HeldUntilUnixMicros: claim.heldUntilMicros}); err != nil {
		return nil, err
	}
	if claim.heldUntilMicros != 0 {
		if err := v.Set(keys.UniqueLapseKey(claim.heldUntilMicros, lane, claim.key), nil); err != nil {
			return nil, err
		}
	}
	res.Created = true
	return res, nil
}

// uniqueHolder returns the id of the message holding key in lane at loggedNow ("" when the key
// is free) and the lane's record of the key (nil when there is none). A record is in force
// while its period has not passed (loggedNow before held_until), or, held while live, while
// the message it names is live in the lane under that key: stored, not cancelled (a message
// cancelled while leased waits only for its lease to end to be removed) and not expired (an
// expired message waits only for a receive to remove it).
func uniqueHolder(v kv.Reader, lane *orreryv1.Lane, key string, loggedNowMicros int64) (string, *orreryv1.UniqueRecord, error) {
	rec := &orreryv1.UniqueRecord{}
	found, err := record.Load(v, keys.UniqueKey(lane, key), rec)
	if err != nil || !found {
		return "", nil, err
	}
	if until := rec.GetHeldUntilUnixMicros(); until != 0 {
		if loggedNowMicros < until {
			return rec.GetMessageId(), rec, nil
		}
		return "", rec, nil
	}
	live, found, err := loadMessage(v, lane, rec.GetMessageId())
	if err != nil {
		return "", nil, err
	}
	expired := live.GetExpiresAtUnixMicros() != 0 && live.GetExpiresAtUnixMicros() <= loggedNowMicros
	if found && live.GetUniqueKey() == key && live.GetCancelled() == nil && !expired {
		return rec.GetMessageId(), rec, nil
	}
	return "", rec, nil
}

// releaseUnique deletes the record of the key stored (a message leaving its lane) holds while
// it is live, if the record names it; a record held for a period stays until it lapses.
func releaseUnique(v kv.View, stored *orreryv1.QueueMessage) error {
	key := stored.GetUniqueKey()
	if key == "" {
		return nil
	}
	recordKey := keys.UniqueKey(stored.GetLane(), key)
	rec := &orreryv1.UniqueRecord{}
	found, err := record.Load(v, recordKey, rec)
	if err != nil || !found || rec.GetHeldUntilUnixMicros() != 0 || rec.GetMessageId() != stored.GetId() {
		return err
	}
	return v.Delete(recordKey)
}

// PruneUniques removes, soonest lapsed first and at most maxRecords, the unique records held
// for a period that lapsed at or before loggedNow. It reports how many it removed and whether
// more remain.
func PruneUniques(v kv.View, loggedNowMicros int64, maxRecords int) (removed int, more bool, err error) {
	return kv.DeleteIndexed(v, keys.UniqueLapsePrefix(), keys.UniqueLapseUpTo(loggedNowMicros), maxRecords, func(lapse []byte) ([]byte, error) {
		key, err := keys.UniqueFromLapse(lapse)
		if err != nil {
			return nil, orrery.Wrap(orrery.CodeInternal, err, "unique lapse index %x", lapse)
		}
		return key, nil
	})
}

// UniquePruneDue reports whether a unique record held for a period lapsed at or before
// loggedNow (PruneUniques would remove one).
func UniquePruneDue(r kv.Reader, loggedNowMicros int64) (bool, error) {
	due := false
	err := r.Scan(keys.UniqueLapsePrefix(), keys.UniqueLapseUpTo(loggedNowMicros), func(_, _ []byte) (bool, error) {
		due = true
		return false, nil
	})
	return due, err
}
