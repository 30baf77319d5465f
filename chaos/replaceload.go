package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/schedule"
)

// maxReplacements bounds how often the workload replaces one schedule's definition, so that
// every generation it had is still read back (the partition keeps the last
// schedule.KeptGenerations replaced ones).
const maxReplacements = schedule.KeptGenerations - 1

// replaceLead is how far after its replacement is sent a new generation's first instant
// falls: beyond scheduleCallTimeout, so that a replacement that applies before its call
// returns starts a generation whose first instant has not passed.
const replaceLead = 3 * time.Second

// runReplaces, every 2–6 s, replaces the definition of one of the replaced schedules at the
// revision it reads (a new generation, Every 1s from an instant replaceLead ahead), or one
// time in three triggers it (TriggerSchedule: one manual occurrence now), up to
// maxReplacements replacements each.
func (w *workload) runReplaces(ctx context.Context, rng *rand.Rand) {
	var replaced []tickSchedule
	for _, s := range w.schedules {
		if w.replaced[s.lane.GetKey()] {
			replaced = append(replaced, s)
		}
	}
	count := map[string]int{}
	for len(replaced) > 0 && sleep(ctx, between(rng, 2*time.Second, 6*time.Second)) {
		s := replaced[rng.IntN(len(replaced))]
		if rng.IntN(3) == 0 || count[s.lane.GetKey()] >= maxReplacements {
			w.trigger(ctx, s)
			continue
		}
		if w.replace(ctx, s) {
			count[s.lane.GetKey()]++
		}
	}
}

// replace reads s and, unless it is cancelled, replaces its definition at the revision read,
// within scheduleCallTimeout, under a fresh command id, recording both calls. It reports
// whether the replacement was sent (whatever its outcome).
func (w *workload) replace(ctx context.Context, s tickSchedule) bool {
	read, rec := w.readSchedule(ctx, s)
	if read.outcome != outcomeOK || rec.GetCancelled() {
		return false
	}
	first := time.Now().Add(replaceLead).Truncate(time.Second)
	def := &orreryv1.ScheduleDefinition{Lane: s.lane, ScheduleId: s.id, Spec: client.Every(time.Second, first),
		Template: &orreryv1.MessageTemplate{PayloadJson: `{"tick":true}`}}
	op := scheduleOp{scheduleID: s.id, key: s.lane.GetKey(), kind: scheduleReplace, expected: read.revision, call: time.Now()}
	var receipt client.Receipt
	callCtx, cancel := context.WithTimeout(ctx, scheduleCallTimeout)
	r, err := w.c.ConfigureSchedule(callCtx, def, read.revision, client.WithReceipt(&receipt))
	cancel()
	op.classify(err, receipt.Bytes != nil)
	op.revision = r.GetRevision()
	w.countOp(err)
	w.scheduleCalls.add(op)
	return true
}

// trigger sends one TriggerSchedule of s within scheduleCallTimeout: the manual occurrence of
// a success is an enqueue the history requires delivered; a success or an unknown outcome
// counts as a trigger that may have enqueued one.
func (w *workload) trigger(ctx context.Context, s tickSchedule) {
	var receipt client.Receipt
	callCtx, cancel := context.WithTimeout(ctx, scheduleCallTimeout)
	r, err := w.c.TriggerSchedule(callCtx, &orreryv1.TriggerSchedule{Lane: s.lane, ScheduleId: s.id}, client.WithReceipt(&receipt))
	cancel()
	w.countOp(err)
	key := s.lane.GetKey()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.triggers[key]++
		for _, id := range r.GetEnqueuedIds() {
			w.enqueued[id] = key
		}
	case receipt.Bytes == nil: // no answer: it may have applied
		w.triggers[key]++
	}
}

// readGenerations reads back every replaced schedule (after its cancel): its generations,
// oldest first, each with its first instant and how far it emitted.
func (w *workload) readGenerations(ctx context.Context) error {
	for _, s := range w.schedules {
		key := s.lane.GetKey()
		if !w.replaced[key] {
			continue
		}
		var in *orreryv1.ScheduleInspection
		if err := w.untilDone(ctx, time.Minute, func(ctx context.Context) error {
			var err error
			in, err = w.c.ScheduleInspection(ctx, s.lane, s.id)
			return err
		}); err != nil {
			return fmt.Errorf("read the generations of schedule %s: %w", s.id, err)
		}
		records := []*orreryv1.ScheduleRecord{in.GetRecord()}
		for _, g := range in.GetGenerations() { // newest first
			records = append(records, g.GetRecord())
		}
		var spans []generationSpan
		for i := len(records) - 1; i >= 0; i-- {
			rec := records[i]
			spans = append(spans, generationSpan{generation: rec.GetGeneration(),
				first: time.UnixMicro(rec.GetDefinition().GetSpec().GetEvery().GetFirstDueAtUnixMicros()), next: rec.GetNextOrdinal()})
		}
		if spans[0].generation != 1 {
			return fmt.Errorf("schedule %s: generations %v read back, not from the first (more than %d replacements)", s.id, spanNumbers(spans), schedule.KeptGenerations)
		}
		w.mu.Lock()
		w.generations[key] = spans
		w.mu.Unlock()
	}
	return nil
}
