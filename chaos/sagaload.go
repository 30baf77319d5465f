package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// sagaRunners is how many goroutines of a workload run sagas, one saga at a time each.
const sagaRunners = 4

// sagaCallTimeout bounds each saga compare-and-set (the client retries within it). It is
// about the failure detection on loopback, shorter than the other calls' callTimeout, so that
// a call caught by a fault may end without an answer while its command may still apply: an
// unknown outcome, which the linearizability check must allow for.
const sagaCallTimeout = 2 * time.Second

// sagaDeadlineMin and sagaDeadlineMax bound how far ahead a start or an advance sets a saga's
// deadline: a few seconds, so that deadlines fall while faults go on.
const (
	sagaDeadlineMin = 2 * time.Second
	sagaDeadlineMax = 6 * time.Second
)

// sagaRun is one saga of a workload as its runner knows it.
type sagaRun struct {
	id        string
	lane      *orreryv1.Lane
	partition int
	// revision and deadline are the revision the runner will CAS on next and its deadline;
	// over is set once the runner knows, or assumes, the saga terminal (or lost track of it).
	revision uint64
	deadline time.Time
	over     bool
	// answered are the commands the partition answered with a receipt, for replay.
	answered []answeredCommand
}

// answeredCommand is a command a partition answered with a receipt: its request and the
// receipt's bytes.
type answeredCommand struct {
	commandID string
	what      string
	send      func(ctx context.Context, opts ...client.CallOption) error
	receipt   []byte
}

// runSagas runs one saga after another until ctx ends: it starts it with a deadline a few
// seconds ahead, advances it zero to three times by CAS on its revision (one time in three two
// CAS race from the same revision), then either lets the due coordinator expire it, or
// completes or cancels it close to its deadline, racing the coordinator; it reads the saga
// back after any CAS whose outcome it does not know, and replays some of the saga's answered
// commands at the end.
func (w *workload) runSagas(ctx context.Context, rng *rand.Rand) {
	for sleep(ctx, between(rng, 100*time.Millisecond, time.Second)) {
		s := w.newSaga(rng)
		w.runSaga(ctx, rng, s)
		w.replaySome(ctx, rng, s.answered)
	}
}

// newSaga is a fresh saga alone in its lane, on a random partition, and remembered for the
// final reads.
func (w *workload) newSaga(rng *rand.Rand) *sagaRun {
	p := rng.IntN(w.partitions)
	s := &sagaRun{id: uuid.NewString(), partition: p,
		lane: &orreryv1.Lane{Namespace: w.namespace, Queue: w.queue, Key: keyOn(w.namespace, "g-"+uuid.NewString(), p, w.partitions)}}
	w.mu.Lock()
	w.sagaRuns = append(w.sagaRuns, s)
	w.mu.Unlock()
	return s
}

// runSaga takes s from its start to its end.
func (w *workload) runSaga(ctx context.Context, rng *rand.Rand, s *sagaRun) {
	w.exchange(ctx, s, sagaStart, time.Now().Add(between(rng, sagaDeadlineMin, sagaDeadlineMax)))
	for range rng.IntN(4) {
		if s.over || !sleep(ctx, between(rng, 300*time.Millisecond, 2500*time.Millisecond)) {
			return
		}
		if rng.IntN(3) == 0 {
			w.raceAdvances(ctx, rng, s)
		} else {
			w.exchange(ctx, s, sagaAdvance, time.Now().Add(between(rng, sagaDeadlineMin, sagaDeadlineMax)))
		}
	}
	if s.over {
		return
	}
	switch rng.IntN(3) {
	case 0: // the coordinator expires it; read it after its deadline
		if sleep(ctx, time.Until(s.deadline)+between(rng, 500*time.Millisecond, 2*time.Second)) {
			w.readSaga(ctx, s, false)
		}
	default: // the client ends it close to its deadline, racing the coordinator
		kind := sagaComplete
		if rng.IntN(2) == 0 {
			kind = sagaCancel
		}
		if sleep(ctx, time.Until(s.deadline)+between(rng, -400*time.Millisecond, 200*time.Millisecond)) {
			w.exchange(ctx, s, kind, time.Time{})
			w.readSaga(ctx, s, false)
		}
	}
}

// raceAdvances sends two advances of s from the same revision at once: at most one may win.
// When neither won, it reads s back.
func (w *workload) raceAdvances(ctx context.Context, rng *rand.Rand, s *sagaRun) {
	var racers [2]*sagaRun
	for i := range racers {
		racer := *s
		racer.answered = nil
		racers[i] = &racer
	}
	var wg sync.WaitGroup
	for _, racer := range racers {
		deadline := time.Now().Add(between(rng, sagaDeadlineMin, sagaDeadlineMax))
		wg.Go(func() { w.send(ctx, racer, sagaAdvance, deadline) })
	}
	wg.Wait()
	won := false
	for _, racer := range racers {
		s.answered = append(s.answered, racer.answered...)
		if racer.revision > s.revision {
			s.revision, s.deadline, won = racer.revision, racer.deadline, true
		}
	}
	if !won {
		w.readSaga(ctx, s, false)
	}
}

// exchange sends one CAS of s and, unless it succeeded, reads s back to learn its revision.
func (w *workload) exchange(ctx context.Context, s *sagaRun, kind sagaOpKind, deadline time.Time) {
	if op := w.send(ctx, s, kind, deadline); op.outcome != outcomeOK && !s.over {
		w.readSaga(ctx, s, false)
	}
}

// send sends one CompareExchangeSaga of kind on s's revision (a start: on 0) under a fresh
// command id, records it, and moves s to the revision it won. An end, or a start the partition
// refused, marks s over.
func (w *workload) send(ctx context.Context, s *sagaRun, kind sagaOpKind, deadline time.Time) sagaOp {
	m := &orreryv1.CompareExchangeSaga{Lane: s.lane, SagaId: s.id, ExpectedRevision: s.revision, Phase: targetPhase(kind),
		StateJson: fmt.Sprintf(`{"%s":%d}`, kind, s.revision)}
	if kind == sagaStart {
		m.ExpectedRevision = 0
	}
	if !deadline.IsZero() {
		deadline = time.UnixMicro(deadline.UnixMicro())
		m.DeadlineUnixMicros = deadline.UnixMicro()
		m.Timeout = &orreryv1.SagaTimeout{Queue: w.queue, Template: &orreryv1.MessageTemplate{PayloadJson: `{"saga_timeout":true}`}}
	}
	commandID := "saga-" + uuid.NewString()
	op := sagaOp{sagaID: s.id, key: s.lane.GetKey(), kind: kind, expected: m.GetExpectedRevision(), deadline: deadline, call: time.Now()}
	var receipt client.Receipt
	callCtx, cancel := context.WithTimeout(ctx, sagaCallTimeout)
	r, err := w.c.CompareExchangeSaga(callCtx, m, client.WithCommandID(commandID), client.WithReceipt(&receipt))
	cancel()
	op.classify(err, receipt.Bytes != nil)
	if err == nil {
		op.revision, op.phase = r.GetRevision(), r.GetPhase()
		s.revision, s.deadline = r.GetRevision(), deadline
	}
	w.countOp(err)
	w.sagas.add(op)
	if receipt.Bytes != nil {
		s.answered = append(s.answered, answeredCommand{commandID: commandID, what: fmt.Sprintf("CompareExchangeSaga %s of saga %s", kind, s.id),
			receipt: receipt.Bytes, send: func(ctx context.Context, opts ...client.CallOption) error {
				_, err := w.c.CompareExchangeSaga(ctx, m, opts...)
				return err
			}})
	}
	if op.ends() || kind == sagaStart && op.outcome == outcomeFailed {
		s.over = true
	}
	return op
}

// classify sets the op's outcome from the call's error and whether the partition answered
// with a receipt (classifyCall).
func (op *sagaOp) classify(err error, receipt bool) {
	op.outcome, op.returned, op.code, op.err = classifyCall(err, receipt)
}

// readSaga reads s (InspectSaga), records the read, and moves s to what it found: its revision,
// and over when terminal, absent or unreadable. final marks the reads after healing.
func (w *workload) readSaga(ctx context.Context, s *sagaRun, final bool) sagaOp {
	op := sagaOp{sagaID: s.id, key: s.lane.GetKey(), kind: sagaRead, call: time.Now(), final: final}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	r, err := w.c.InspectSaga(callCtx, s.lane, s.id)
	cancel()
	op.classify(err, orrery.CodeOf(err) == orrery.CodeNotFound) // NotFound is the partition's answer
	w.countOp(err)
	if err == nil {
		op.revision, op.phase, op.record = r.GetRevision(), r.GetPhase(), r
		s.revision, s.deadline = r.GetRevision(), time.UnixMicro(r.GetDeadlineUnixMicros())
	}
	s.over = s.over || err != nil || r.GetPhase() != orreryv1.SagaPhase_SAGA_PHASE_WAITING
	w.sagas.add(op)
	return op
}

// replaySome sends again, one time in three each and at most two, commands the partition had
// answered, under the same command id with the same request, and records both receipts.
func (w *workload) replaySome(ctx context.Context, rng *rand.Rand, answered []answeredCommand) {
	replayed := 0
	for _, cmd := range answered {
		if replayed == 2 || rng.IntN(3) != 0 {
			continue
		}
		replayed++
		w.replay(ctx, cmd)
	}
}

// replay sends cmd again under its command id and records what came back.
func (w *workload) replay(ctx context.Context, cmd answeredCommand) {
	var again client.Receipt
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	err := cmd.send(callCtx, client.WithCommandID(cmd.commandID), client.WithReceipt(&again))
	cancel()
	w.countOp(err)
	r := receiptReplay{commandID: cmd.commandID, what: cmd.what, first: cmd.receipt, again: again.Bytes}
	if again.Bytes == nil && err != nil {
		r.againCode, r.againErr = orrery.CodeOf(err), err.Error()
	}
	w.sagas.addReplay(r)
}

// countOp counts one call of the workload and whether it failed.
func (w *workload) countOp(err error) {
	w.ops.Add(1)
	if err != nil {
		w.opsFailed.Add(1)
	}
}

// readSagas reads every saga back after healing (each retried within a minute until the
// partition answers), for the checkers: its phase, revision and timeout message id.
func (w *workload) readSagas(ctx context.Context) (unread int) {
	w.mu.Lock()
	runs := append([]*sagaRun(nil), w.sagaRuns...)
	w.mu.Unlock()
	for _, s := range runs {
		deadline := time.Now().Add(time.Minute)
		for w.readSaga(ctx, s, true).outcome == outcomeUnknown {
			if time.Now().After(deadline) || !sleep(ctx, 250*time.Millisecond) {
				unread++
				break
			}
		}
	}
	return unread
}
