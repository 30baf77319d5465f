package chaos

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// sagaVerdict is what checkSagaTimeouts found.
type sagaVerdict struct {
	// sagas counts the sagas the workload started (whatever the start's outcome); timeouts the
	// distinct timeout messages delivered.
	sagas, timeouts int
	// doubleTimeouts: a Waiting revision that produced more than one timeout message, a saga
	// that timed out at two revisions, or a saga a client ended that timed out.
	doubleTimeouts int
	// lost: a saga read TimedOut after healing whose timeout message was never delivered, or a
	// saga still Waiting after healing although its deadline passed more than the recovery
	// bound before.
	lost int
	// early: a timeout message enqueued before the deadline of the revision it expired.
	early int
	// problems describes each violation, sorted.
	problems []string
}

// violations is the number of violations of every kind.
func (v sagaVerdict) violations() int { return v.doubleTimeouts + v.lost + v.early }

// checkSagaTimeouts checks the saga timeouts of a history against the saga contract
// (grains/saga): ExpireSaga enqueues the timeout of a Waiting revision under an id derived
// from the saga and that revision, at a logged time at or after its deadline, and writes
// TimedOut, a terminal phase, in the same apply; a client's CompareExchangeSaga to Completed
// or Cancelled also needs the saga Waiting and also leaves it terminal. Hence:
//   - double_timeouts: each Waiting revision produced at most one timeout message (one id,
//     enqueued once: every delivery of it shares one enqueue time); a saga timed out at most
//     once, at one revision; and a saga a client ended (a complete or cancel that returned
//     success) produced no timeout message at all, before or after that end was acknowledged
//     (the end and the expiry each consume the one Waiting revision they both need). An end
//     whose outcome is unknown proves nothing and is not held against the saga;
//   - early: no timeout message was enqueued before the deadline of the revision it expired;
//   - lost: a saga read TimedOut after healing had its timeout message (the id its record
//     names) delivered, and no saga read Waiting after healing had a deadline more than
//     recoveryBound before that read.
func checkSagaTimeouts(h history) sagaVerdict {
	var v sagaVerdict
	fail := func(count *int, format string, args ...any) {
		*count++
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
	started := map[string]bool{}
	endedBy := map[string]sagaOp{} // saga id → the client's acknowledged end
	for _, op := range h.sagaOps {
		started[op.sagaID] = true
		if op.ends() && op.outcome == outcomeOK {
			endedBy[op.sagaID] = op
		}
	}
	v.sagas = len(started)
	byRevision := timeoutsByRevision(h.deliveries)
	delivered := map[string]bool{}
	for _, sagaID := range sortedKeys(byRevision) {
		revisions := byRevision[sagaID]
		for _, revision := range sortedKeys(revisions) {
			messages := revisions[revision]
			v.timeouts += len(messages)
			if len(messages) > 1 {
				fail(&v.doubleTimeouts, "saga %s: Waiting revision %d produced %d timeout messages: %s", sagaID, revision, len(messages), describeTimeouts(messages))
			}
			for _, d := range messages {
				delivered[d.id] = true
				if deadline := time.UnixMicro(d.timeoutOf.GetDeadlineUnixMicros()); d.enqueuedAt.Before(deadline) {
					fail(&v.early, "saga %s: the timeout %s of Waiting revision %d was enqueued at %v, before its deadline %v", sagaID, d.id, revision, d.enqueuedAt, deadline)
				}
			}
			if end, ok := endedBy[sagaID]; ok {
				fail(&v.doubleTimeouts, "saga %s: ended by the client (%s of revision %d, acknowledged at %v), yet its Waiting revision %d timed out: %s",
					sagaID, end.kind, end.expected, end.returned, revision, describeTimeouts(messages))
			}
		}
		if len(revisions) > 1 {
			fail(&v.doubleTimeouts, "saga %s: timed out at Waiting revisions %v; TimedOut is terminal, so a saga times out once at most", sagaID, sortedKeys(revisions))
		}
	}
	for _, op := range h.sagaOps {
		if !op.final || op.outcome != outcomeOK {
			continue
		}
		switch r := op.record; r.GetPhase() {
		case orreryv1.SagaPhase_SAGA_PHASE_TIMED_OUT:
			if !delivered[r.GetTimeoutMessageId()] {
				fail(&v.lost, "saga %s: TimedOut at revision %d after healing, but its timeout message %s was never delivered", op.sagaID, r.GetRevision(), r.GetTimeoutMessageId())
			}
		case orreryv1.SagaPhase_SAGA_PHASE_WAITING:
			if deadline := time.UnixMicro(r.GetDeadlineUnixMicros()); r.GetDeadlineUnixMicros() != 0 && deadline.Before(op.call.Add(-h.recoveryBound)) {
				fail(&v.lost, "saga %s: still Waiting at revision %d after healing (read at %v), although its deadline %v passed more than %v before", op.sagaID, r.GetRevision(), op.call, deadline, h.recoveryBound)
			}
		}
	}
	sort.Strings(v.problems)
	return v
}

// timeoutsByRevision groups the saga timeout messages delivered by saga id and Waiting
// revision, one delivery for each distinct message (id and enqueue time): redeliveries of one
// message are one message.
func timeoutsByRevision(deliveries []delivery) map[string]map[uint64][]delivery {
	type message struct {
		id         string
		enqueuedAt int64
	}
	seen := map[message]bool{}
	out := map[string]map[uint64][]delivery{}
	for _, d := range deliveries {
		if d.origin != client.OriginSagaTimeout || d.timeoutOf == nil {
			continue
		}
		m := message{d.id, d.enqueuedAt.UnixMicro()}
		if seen[m] {
			continue
		}
		seen[m] = true
		sagaID, revision := d.timeoutOf.GetSagaId(), d.timeoutOf.GetWaitingRevision()
		if out[sagaID] == nil {
			out[sagaID] = map[uint64][]delivery{}
		}
		out[sagaID][revision] = append(out[sagaID][revision], d)
	}
	return out
}

// describeTimeouts names each timeout message with its enqueue and first receive times.
func describeTimeouts(messages []delivery) string {
	s := ""
	for i, d := range messages {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s (enqueued %v, received %v)", d.id, d.enqueuedAt.UTC().Format(time.RFC3339Nano), d.handledAt.UTC().Format(time.RFC3339Nano))
	}
	return s
}

// sortedKeys is m's keys in order.
func sortedKeys[K interface{ ~string | ~uint64 }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// receiptVerdict is what checkReceipts found.
type receiptVerdict struct {
	// replays counts the commands sent again, compared those whose replay got a receipt (or an
	// IdempotencyConflict) to compare, mismatches those whose replay did not get the first
	// receipt's bytes.
	replays, compared, mismatches int
	problems                      []string
}

// checkReceipts checks that every replayed command (the same request under the same command
// id) was answered with a receipt byte-identical to the first (the command inbox stores the
// receipt's bytes and returns them). An IdempotencyConflict is a mismatch too: the request was
// the same. A replay that got no answer (the partition unavailable) proves nothing.
func checkReceipts(replays []receiptReplay) receiptVerdict {
	v := receiptVerdict{replays: len(replays)}
	for _, r := range replays {
		switch {
		case r.again != nil:
			v.compared++
			if !bytes.Equal(r.first, r.again) {
				v.mismatches++
				v.problems = append(v.problems, fmt.Sprintf("command %s (%s) replayed: receipt %x, first %x", r.commandID, r.what, r.again, r.first))
			}
		case r.againCode == orrery.CodeIdempotencyConflict:
			v.compared++
			v.mismatches++
			v.problems = append(v.problems, fmt.Sprintf("command %s (%s) replayed with the same request: IdempotencyConflict (%s), first receipt %x", r.commandID, r.what, r.againErr, r.first))
		}
	}
	sort.Strings(v.problems)
	return v
}
