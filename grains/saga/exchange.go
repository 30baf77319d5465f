package saga

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyCompareExchange applies CompareExchangeSaga at the logged time loggedNowMicros on behalf
// of principal.
//
// Expected revision 0 creates the saga, Waiting only, when it is absent; the principal becomes
// its creator and its revision is 1. Otherwise the saga must exist at exactly the expected
// revision and be Waiting: it may stay Waiting (state, deadline and timeout are replaced; no
// deadline means none) or end Completed or Cancelled; the revision grows by 1 and the creator is
// kept. A deadline and a timeout come together, only in Waiting, and the deadline must be after
// loggedNowMicros. The due index follows the saga: one entry at the deadline, token the new
// revision, while it is Waiting with a deadline, none otherwise.
//
// Every check runs before the first write, so an error leaves v untouched.
func ApplyCompareExchange(v kv.View, lim input.Limits, principal string, m *orreryv1.CompareExchangeSaga, loggedNowMicros int64) (*orreryv1.SagaResult, error) {
	if err := validateExchange(lim, m, loggedNowMicros); err != nil {
		return nil, err
	}
	lane, sagaID := m.GetLane(), m.GetSagaId()
	current, found, err := load(v, lane, sagaID)
	if err != nil {
		return nil, err
	}

	op, from := opCreate, absent
	if m.GetExpectedRevision() == 0 {
		if found {
			return nil, orrery.FieldErrorf(orrery.CodeRevisionConflict, "expected_revision",
				"expected revision 0 creates only an absent saga; saga %s exists at revision %d", sagaID, current.GetRevision())
		}
	} else {
		if !found {
			return nil, notFound(lane, sagaID)
		}
		if current.GetRevision() != m.GetExpectedRevision() {
			return nil, revisionConflict(m.GetExpectedRevision(), current.GetRevision())
		}
		op, from = opExchange, current.GetPhase()
	}
	if err := checkTransition(op, from, m.GetPhase()); err != nil {
		return nil, err
	}

	next := &orreryv1.SagaRecord{
		Lane: &orreryv1.Lane{
			Namespace: lane.GetNamespace(),
			Queue:     lane.GetQueue(),
			Key:       lane.GetKey(),
		},
		SagaId:             sagaID,
		Revision:           1,
		Phase:              m.GetPhase(),
		StateJson:          m.GetStateJson(),
		DeadlineUnixMicros: m.GetDeadlineUnixMicros(),
		Creator:            principal,
	}
	if t := m.GetTimeout(); t != nil {
		next.Timeout = proto.CloneOf(t)
	}
	next.Labels = m.GetLabels()
	if found {
		next.Revision = current.GetRevision() + 1
		next.Creator = current.GetCreator()
		if len(next.Labels) == 0 {
			next.Labels = current.GetLabels()
		}
	}

	if err := store(v, lim, current, next); err != nil {
		return nil, err
	}
	if err := due.Move(v, dueAt(current), dueRef(next)); err != nil {
		return nil, err
	}
	return result(next), nil
}

// validateExchange checks everything about m that does not depend on the stored saga.
func validateExchange(lim input.Limits, m *orreryv1.CompareExchangeSaga, loggedNowMicros int64) error {
	if err := validateAddress(m.GetLane(), m.GetSagaId()); err != nil {
		return err
	}
	phase := m.GetPhase()
	if !known(phase) {
		return orrery.Invalid("phase", "must be WAITING, COMPLETED or CANCELLED, got %s", phaseName(phase))
	}
	if err := input.JSONValue("state_json", m.GetStateJson(), lim.MaxStateBytes); err != nil {
		return err
	}
	if err := input.Labels("labels", m.GetLabels()); err != nil {
		return err
	}
	deadline, timeout := m.GetDeadlineUnixMicros(), m.GetTimeout()
	if deadline != 0 {
		if err := input.Instant("deadline_unix_micros", deadline); err != nil {
			return err
		}
	}
	if timeout != nil {
		if err := input.QueueName("timeout.queue", timeout.GetQueue(), false); err != nil {
			return err
		}
		if err := input.Template("timeout.template", timeout.GetTemplate(), lim); err != nil {
			return err
		}
	}
	switch {
	case deadline == 0 && timeout == nil:
		return nil
	case phase != waiting && deadline != 0:
		return orrery.Invalid("deadline_unix_micros", "only a WAITING saga has a deadline and a timeout; a %s saga has neither", phaseName(phase))
	case phase != waiting:
		return orrery.Invalid("timeout", "only a WAITING saga has a deadline and a timeout; a %s saga has neither", phaseName(phase))
	case timeout == nil:
		return orrery.Invalid("timeout", "is required with a deadline")
	case deadline == 0:
		return orrery.Invalid("deadline_unix_micros", "is required with a timeout")
	case deadline <= loggedNowMicros:
		return orrery.Invalid("deadline_unix_micros", "must be after the logged time %s, got %s", input.FormatInstant(loggedNowMicros), input.FormatInstant(deadline))
	}
	if ttl := timeout.GetTemplate().GetTimeToLiveMicros(); ttl != 0 {
		if _, ok := input.AddMicros(deadline, ttl); !ok {
			return orrery.Invalid("timeout.template.time_to_live_micros",
				"deadline %s plus time to live %s is past the last instant %s", input.FormatInstant(deadline), input.FormatDuration(ttl), input.FormatInstant(input.MaxInstantMicros))
		}
	}
	return nil
}
