package saga

import (
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
)

// Load reads the saga sagaID in lane. It reports found=false, and no error, when there is none.
// A malformed lane or id is a Validation error naming "lane" or "saga_id".
func Load(v kv.Reader, lane *orreryv1.Lane, sagaID string) (*orreryv1.SagaRecord, bool, error) {
	if err := validateAddress(lane, sagaID); err != nil {
		return nil, false, err
	}
	return load(v, lane, sagaID)
}

// TimeoutMessageID is the id of the timeout message of sagaID's Waiting revision:
// "saga-timeout-{SagaId:N}-{WaitingRevision:x16}", the id in 32 lower-case hex digits without
// hyphens and the revision in 16 lower-case hex digits, zero-padded. sagaID must be a canonical
// lower-case UUID.
func TimeoutMessageID(sagaID string, waitingRevision uint64) string {
	return fmt.Sprintf("saga-timeout-%s-%016x", input.UUIDHex(sagaID), waitingRevision)
}

// validateAddress checks the lane and id every saga mutation names.
func validateAddress(lane *orreryv1.Lane, sagaID string) error {
	if err := input.Lane("lane", lane, false); err != nil {
		return err
	}
	return input.UUID("saga_id", sagaID)
}

// load reads a saga without validating its address.
func load(v kv.Reader, lane *orreryv1.Lane, sagaID string) (*orreryv1.SagaRecord, bool, error) {
	rec := &orreryv1.SagaRecord{}
	found, err := record.Load(v, keys.SagaKey(lane, sagaID), rec)
	if err != nil || !found {
		return nil, false, err
	}
	return rec, true, nil
}

// store writes rec under its key, on the partition's retained-record account, and moves its
// listing index entry from prev's phase (prev nil: the saga is new) to its own.
func store(v kv.View, lim input.Limits, prev, rec *orreryv1.SagaRecord) error {
	if err := retained.Store(v, lim, keys.SagaKey(rec.GetLane(), rec.GetSagaId()), rec); err != nil {
		return err
	}
	entry := IndexKey(rec)
	if prev != nil {
		prevEntry := IndexKey(prev)
		if string(prevEntry) == string(entry) {
			return nil
		}
		if err := v.Delete(prevEntry); err != nil {
			return err
		}
	}
	return v.Set(entry, nil)
}

// IndexKey is rec's entry in the saga listing index (keys.SagaIndex), under its phase.
func IndexKey(rec *orreryv1.SagaRecord) []byte {
	return keys.IndexEntryKey(keys.SagaIndex, rec.GetLane(), rec.GetSagaId(), byte(rec.GetPhase()))
}

// dueAt is the instant rec's due-index entry sits at, or zero when it has none: only a
// Waiting saga with a deadline is due.
func dueAt(rec *orreryv1.SagaRecord) int64 {
	if rec.GetPhase() != waiting {
		return 0
	}
	return rec.GetDeadlineUnixMicros()
}

// dueRef is rec's due-index entry (due at zero when it has none), with the Waiting revision as
// its CAS token.
func dueRef(rec *orreryv1.SagaRecord) *orreryv1.DueRef {
	return &orreryv1.DueRef{
		Kind:            orreryv1.DueKind_DUE_KIND_SAGA,
		Lane:            rec.GetLane(),
		Id:              rec.GetSagaId(),
		Token:           rec.GetRevision(),
		DueAtUnixMicros: dueAt(rec),
	}
}

// timeoutLane is where a saga's timeout message lands: the saga's namespace and key, the
// timeout's queue — the saga's own partition by construction.
func timeoutLane(sagaLane *orreryv1.Lane, timeout *orreryv1.SagaTimeout) *orreryv1.Lane {
	return &orreryv1.Lane{
		Namespace: sagaLane.GetNamespace(),
		Queue:     timeout.GetQueue(),
		Key:       sagaLane.GetKey(),
	}
}

// result reports rec after a mutation.
func result(rec *orreryv1.SagaRecord) *orreryv1.SagaResult {
	return &orreryv1.SagaResult{
		Revision:         rec.GetRevision(),
		Phase:            rec.GetPhase(),
		TimeoutMessageId: rec.GetTimeoutMessageId(),
	}
}

// notFound is the error for a saga that does not exist.
func notFound(lane *orreryv1.Lane, sagaID string) *orrery.Error {
	return orrery.FieldErrorf(orrery.CodeNotFound, "saga_id", "saga %s does not exist in lane %s", sagaID, laneName(lane))
}

// revisionConflict is the error for an expected revision that is not the stored one.
func revisionConflict(expected, stored uint64) *orrery.Error {
	return orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_revision",
		"expected revision %d, the saga is at revision %d", expected, stored)
}

// laneName renders a lane for messages.
func laneName(lane *orreryv1.Lane) string {
	return fmt.Sprintf("%q/%q/%q", lane.GetNamespace(), lane.GetQueue(), lane.GetKey())
}
