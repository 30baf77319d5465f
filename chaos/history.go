package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// tickSchedule is one Every-1s schedule of a workload, alone in its lane.
type tickSchedule struct {
	lane      *orreryv1.Lane
	id        string
	partition int
	first     time.Time
}

// timer is one At schedule (a one-shot timer) of a workload, alone in its lane, whose
// ConfigureSchedule returned success.
type timer struct {
	lane      *orreryv1.Lane
	id        string
	partition int
	due       time.Time
}

// generationSpan is one generation of a replaced Every-1s schedule as read back: its
// ordinal o is due at first + o × 1 s, and it emitted ordinals 0..next-1.
type generationSpan struct {
	generation uint64
	first      time.Time
	next       uint64
}

// delivery is one message a consumer was given: a worker's handler, or a receive that never
// acks (dropped: its lease expires and the message is delivered again).
type delivery struct {
	id        string
	key       string // lane key
	partition int
	origin    client.Origin
	// generation, ordinal and nominal are an occurrence's; manual marks one of a
	// TriggerSchedule (ordinal 0, its nominal instant the trigger's logged time).
	generation uint64
	ordinal    uint64
	nominal    time.Time
	manual     bool
	enqueuedAt time.Time
	count      uint32 // delivery count
	handledAt  time.Time
	dropped    bool
	// timeoutOf is a saga timeout's provenance (which saga, which Waiting revision, which
	// deadline); nil for any other message.
	timeoutOf *orreryv1.SagaTimeoutOrigin
}

// deliveryOf is what a consumer records of message m, received at receivedAt.
func deliveryOf(m *orreryv1.QueueMessage, partition int, receivedAt time.Time) delivery {
	d := delivery{id: m.GetId(), key: m.GetLane().GetKey(), partition: partition, origin: client.OriginEnqueue,
		enqueuedAt: time.UnixMicro(m.GetEnqueuedAtUnixMicros()), count: m.GetDeliveryCount(), handledAt: receivedAt}
	if o := m.GetOccurrence(); o != nil {
		d.origin, d.ordinal, d.nominal = client.OriginOccurrence, o.GetOrdinal(), time.UnixMicro(o.GetNominalDueAtUnixMicros())
		d.generation, d.manual = o.GetGeneration(), o.GetManual()
	} else if m.GetSagaTimeout() != nil {
		d.origin, d.timeoutOf = client.OriginSagaTimeout, m.GetSagaTimeout()
	}
	return d
}

// deliveryLog records every delivery a worker's handler saw.
type deliveryLog struct {
	mu  sync.Mutex
	all []delivery
}

func (l *deliveryLog) handle(_ context.Context, m *client.Message) error {
	d := delivery{id: m.ID(), key: m.Lane().GetKey(), partition: m.Partition(), origin: m.Origin(),
		enqueuedAt: m.EnqueuedAt(), count: m.DeliveryCount(), handledAt: time.Now(), timeoutOf: m.SagaTimeout()}
	if o := m.Occurrence(); o != nil {
		d.ordinal, d.nominal = o.GetOrdinal(), time.UnixMicro(o.GetNominalDueAtUnixMicros())
		d.generation, d.manual = o.GetGeneration(), o.GetManual()
	}
	l.add(d)
	return nil
}

// add records one delivery.
func (l *deliveryLog) add(d delivery) {
	l.mu.Lock()
	l.all = append(l.all, d)
	l.mu.Unlock()
}

// snapshot copies what was delivered so far.
func (l *deliveryLog) snapshot() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// history is what a run recorded at its client and read back from the cluster after healing:
// the checkers' input (checkHistory).
type history struct {
	// schedules are Every-1s schedules, each alone in its lane; crons cron schedules, each
	// alone in its lane, due every 2 s in cronHours.
	schedules []tickSchedule
	crons     []tickSchedule
	cronHours cronHours
	// next is each schedule's next ordinal read back after its cancel, by lane key, and
	// cancelledAt when the cancel returned.
	next map[string]uint64
	// generations are, by lane key, the generations of each schedule the workload replaced,
	// oldest first, as read back after its cancel: each one's first instant and how far it
	// emitted (a schedule not in it has one generation: its first instant and next).
	generations map[string][]generationSpan
	// triggers counts, by lane key, the TriggerSchedule calls whose outcome was success or
	// unknown: each may have enqueued one manual occurrence (those that returned success are
	// in enqueued, so a lost one is found).
	triggers    map[string]int
	cancelledAt map[string]time.Time
	// cancelledEarly are the schedules (by lane key) cancelled while faults went on: a fault
	// just before the cancel may have held their emission back, so they are not checked for a
	// stall (their ordinals 0..next-1 are).
	cancelledEarly map[string]bool
	// paused are the schedules (by lane key) that were paused at some time, and excused the
	// ordinals their ledgers record PAUSED (passed while paused, never enqueued).
	paused  map[string]bool
	excused map[string]map[uint64]bool
	// timers are At timers whose creation returned success, each alone in its lane.
	timers []timer
	// enqueued maps the id of each message whose Enqueue returned success to its lane key.
	enqueued map[string]string
	// deliveries are every delivery to any consumer, saga timeouts included.
	deliveries []delivery
	// sagaOps are every saga call of the workload, the final reads after healing included;
	// replays every command sent again under its command id.
	sagaOps []sagaOp
	replays []receiptReplay
	// scheduleOps are every schedule call of the workload at an expected revision (creates,
	// pauses, resumes, cancels) and every read of a schedule's revision.
	scheduleOps []scheduleOp
	// end is when the history was closed (every lane drained); a timer due after end −
	// recoveryBound is not required to have been delivered.
	end           time.Time
	recoveryBound time.Duration
	// clockAhead is how far ahead of the real time a leader's clock may have run during the
	// run (FaultSkew; the bound --max-clock-offset when the skewed silo was clock-unfit and
	// led nothing): a partition it led stamped logged times that far ahead, and emitted
	// occurrences by them, so a consumer on the real clock may receive an occurrence up to
	// clockAhead before its nominal instant.
	clockAhead time.Duration
}

// verdict is what checkHistory found: each kind of violation counted and described.
type verdict struct {
	// duplicates: an id enqueued twice (deliveries of one id with different enqueue times, or
	// a delivery count repeated), or one ordinal of a schedule under two ids.
	duplicates int
	// gaps: an ordinal in 0..next-1 of a schedule never delivered (and not recorded PAUSED by
	// its ledger), an ordinal beyond next delivered, an ordinal at the wrong nominal instant.
	gaps int
	// lost: an enqueued message or an At timer due before end − recoveryBound never delivered,
	// or a schedule that stopped emitting more than 10 s before its cancel.
	lost int
	// early: an occurrence enqueued or received before its nominal instant.
	early int
	// problems describes each violation, sorted.
	problems []string
	// occurrences counts the occurrence ids delivered, redelivered the ids delivered more than
	// once (lost acks, expired leases, released messages: no violation).
	occurrences, redelivered int
	// maxLateness is the largest lateness of an occurrence of a schedule never paused, a cron
	// schedule, or a timer.
	maxLateness time.Duration
}

// violations is the number of violations of every kind.
func (v verdict) violations() int { return v.duplicates + v.gaps + v.lost + v.early }

// stallBound is how long before its cancel a schedule's last emitted instant may be.
const stallBound = 10 * time.Second

// checkHistory checks a history:
//   - duplicates: no message was enqueued twice: the deliveries of one id share one enqueue
//     time and no delivery count repeats (a repeat is a second enqueue, or a committed receive
//     lost); no ordinal of a schedule is delivered under two ids;
//   - gaps: in each generation of every schedule (one, or those read back of a replaced
//     schedule), the ordinals 0..next-1 are each delivered, at their nominal instant (the
//     generation's first + ordinal × 1 s), except those its ledger records PAUSED; none
//     beyond, none in a generation it never had; no more manual occurrences than the triggers
//     that succeeded or may have (a duplicate otherwise);
//   - early: no occurrence was enqueued (at its logged time, on the clock of the silo that
//     logged it) before its nominal instant, nor received (on the real clock) more than
//     clockAhead, the largest positive offset of a silo's clock in effect, before it;
//   - crons: every cron schedule's ordinals 0..next-1 are each delivered once, none beyond, at
//     increasing instants of its expression by the zone rules compiled into Orrery
//     (cronHours.holds; other rules put them in other hours): a wrong instant counts as a gap;
//   - lost: every enqueued message, and every timer due before end − recoveryBound, was
//     delivered; no schedule's last emitted instant is more than 10 s before its cancel
//     (unless it was cancelled while faults went on).
//
// Redeliveries of one enqueue are counted, not violations.
func checkHistory(h history) verdict {
	var v verdict
	fail := func(count *int, format string, args ...any) {
		*count++
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
	byID := map[string][]delivery{}
	for _, d := range h.deliveries {
		byID[d.id] = append(byID[d.id], d)
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ds := byID[id]
		counts := map[uint32]bool{}
		for _, d := range ds {
			if counts[d.count] {
				fail(&v.duplicates, "message %s (lane %s) delivered twice with delivery count %d: enqueued twice or a committed receive lost", id, d.key, d.count)
			}
			counts[d.count] = true
			if !d.enqueuedAt.Equal(ds[0].enqueuedAt) {
				fail(&v.duplicates, "message %s (lane %s) enqueued twice: at %v and at %v", id, d.key, ds[0].enqueuedAt, d.enqueuedAt)
			}
		}
		if len(ds) > 1 {
			v.redelivered++
		}
		d := ds[0]
		if d.origin != client.OriginOccurrence {
			continue
		}
		v.occurrences++
		if d.enqueuedAt.Before(d.nominal) {
			fail(&v.early, "occurrence %s (lane %s) enqueued at %v, before its nominal instant %v", id, d.key, d.enqueuedAt, d.nominal)
		}
		for _, e := range ds {
			if !e.handledAt.IsZero() && e.handledAt.Add(h.clockAhead).Before(e.nominal) {
				fail(&v.early, "occurrence %s (lane %s) received at %v, before its nominal instant %v (less %v a silo's clock ran ahead)", id, e.key, e.handledAt, e.nominal, h.clockAhead)
				break
			}
		}
	}
	for _, s := range h.schedules {
		key := s.lane.GetKey()
		spans := h.generations[key]
		if len(spans) == 0 {
			spans = []generationSpan{{generation: 1, first: s.first, next: h.next[key]}}
		}
		byGeneration := map[uint64]map[uint64]string{} // generation → ordinal → id
		manual := 0
		for _, id := range ids {
			d := byID[id][0]
			if d.key != key || d.origin != client.OriginOccurrence {
				continue
			}
			if d.manual {
				manual++
				continue
			}
			g := max(d.generation, 1) // a delivery recorded before generations were: the first
			span := slices.IndexFunc(spans, func(sp generationSpan) bool { return sp.generation == g })
			if span < 0 {
				fail(&v.gaps, "schedule %s: ordinal %d delivered in generation %d, which it never had (generations %v)", s.id, d.ordinal, g, spanNumbers(spans))
				continue
			}
			ordinals := byGeneration[g]
			if ordinals == nil {
				ordinals = map[uint64]string{}
				byGeneration[g] = ordinals
			}
			if other, ok := ordinals[d.ordinal]; ok {
				fail(&v.duplicates, "schedule %s: ordinal %d of generation %d delivered under two ids, %s and %s", s.id, d.ordinal, g, min(id, other), max(id, other))
			}
			ordinals[d.ordinal] = id
			if want := spans[span].first.Add(time.Duration(d.ordinal) * time.Second); !d.nominal.Equal(want) {
				fail(&v.gaps, "schedule %s: ordinal %d of generation %d has nominal instant %v, want %v", s.id, d.ordinal, g, d.nominal, want)
			}
			if !h.paused[key] {
				v.maxLateness = max(v.maxLateness, lateness(byID[id]))
			}
		}
		if manual > h.triggers[key] {
			fail(&v.duplicates, "schedule %s: %d manual occurrences delivered for %d triggers", s.id, manual, h.triggers[key])
		}
		for _, sp := range spans {
			ordinals := byGeneration[sp.generation]
			var missing []uint64
			for o := range sp.next {
				if _, ok := ordinals[o]; !ok && !(sp.generation == 1 && h.excused[key][o]) {
					missing = append(missing, o)
				}
			}
			if len(missing) > 0 {
				v.gaps += len(missing) - 1
				fail(&v.gaps, "schedule %s (partition %d): gap, ordinals %v of generation %d's 0..%d never delivered", s.id, s.partition, missing, sp.generation, sp.next-1)
			}
			for o := range ordinals {
				if o >= sp.next {
					fail(&v.gaps, "schedule %s: ordinal %d of generation %d delivered, beyond the %d it emitted", s.id, o, sp.generation, sp.next)
				}
			}
		}
		// The current generation's last emitted instant (one before its first when it emitted
		// none: replaced just before the cancel).
		cur := spans[len(spans)-1]
		last := cur.first.Add(time.Duration(cur.next) * time.Second).Add(-time.Second)
		if lag := h.cancelledAt[key].Sub(last); !h.cancelledEarly[key] && (cur.next == 0 && len(spans) == 1 || lag > stallBound) {
			fail(&v.lost, "schedule %s (partition %d): its last emitted instant %v is %v before its cancel: it stopped emitting", s.id, s.partition, last, lag)
		}
	}
	checkCrons(h, byID, ids, fail, &v)
	byKey := map[string][]delivery{}
	for _, id := range ids {
		d := byID[id][0]
		byKey[d.key] = append(byKey[d.key], d)
	}
	for _, tm := range h.timers {
		key := tm.lane.GetKey()
		var got []delivery
		for _, d := range byKey[key] {
			if d.origin == client.OriginOccurrence {
				got = append(got, d)
			}
		}
		switch {
		case len(got) == 0 && tm.due.Before(h.end.Add(-h.recoveryBound)):
			fail(&v.lost, "timer %s (lane %s, partition %d) due at %v never delivered (history closed at %v)", tm.id, key, tm.partition, tm.due, h.end)
		case len(got) > 1:
			fail(&v.duplicates, "timer %s (lane %s) delivered under %d ids", tm.id, key, len(got))
		}
		for _, d := range got {
			if !d.nominal.Equal(tm.due) {
				fail(&v.gaps, "timer %s: delivered with nominal instant %v, want %v", tm.id, d.nominal, tm.due)
			}
			v.maxLateness = max(v.maxLateness, lateness(byID[d.id]))
		}
	}
	var lost []string
	for id, key := range h.enqueued {
		if len(byID[id]) == 0 {
			lost = append(lost, id+" (lane "+key+")")
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		v.lost += len(lost) - 1
		fail(&v.lost, "%d enqueued messages never delivered: %v", len(lost), lost)
	}
	sort.Strings(v.problems)
	return v
}

// historyProblems checks what a worker was delivered against what the schedules emitted
// (next: each schedule lane's next ordinal once cancelled, at cancelledAt) and what the test
// enqueued (message id → lane key), with checkHistory: no message enqueued twice, no schedule
// with a gap, none that stalled, no occurrence early, every enqueued message delivered.
// Problems come sorted.
func historyProblems(schedules []tickSchedule, deliveries []delivery, enqueued map[string]string, next map[string]uint64, cancelledAt map[string]time.Time) (problems []string, summary string) {
	v := checkHistory(history{schedules: schedules, next: next, cancelledAt: cancelledAt, enqueued: enqueued, deliveries: deliveries})
	total := 0
	for _, s := range schedules {
		total += int(next[s.lane.GetKey()])
	}
	summary = fmt.Sprintf("%d schedules emitted %d occurrences, %d messages enqueued; %d ids redelivered (lost acks or receive replies)",
		len(schedules), total, len(enqueued), v.redelivered)
	return v.problems, summary
}

// checkCrons checks the cron schedules of h (see checkHistory) over the deliveries by id
// (byID, its sorted ids), counting through fail into v.
func checkCrons(h history, byID map[string][]delivery, ids []string, fail func(count *int, format string, args ...any), v *verdict) {
	for _, s := range h.crons {
		key := s.lane.GetKey()
		next := h.next[key]
		ordinals := map[uint64]delivery{}
		for _, id := range ids {
			d := byID[id][0]
			if d.key != key || d.origin != client.OriginOccurrence {
				continue
			}
			if other, ok := ordinals[d.ordinal]; ok {
				fail(&v.duplicates, "cron schedule %s: ordinal %d delivered under two ids, %s and %s", s.id, d.ordinal, min(id, other.id), max(id, other.id))
			}
			ordinals[d.ordinal] = d
			if !h.cronHours.holds(d.nominal) {
				fail(&v.gaps, "cron schedule %s: ordinal %d at %v (%v in %s), not an instant of %q by the compiled rules",
					s.id, d.ordinal, d.nominal.UTC(), d.nominal.In(h.cronHours.zone).Format(time.DateTime), cronZone, h.cronHours.expression())
			}
			if d.ordinal >= next {
				fail(&v.gaps, "cron schedule %s: ordinal %d delivered, beyond the %d it emitted", s.id, d.ordinal, next)
			}
			v.maxLateness = max(v.maxLateness, lateness(byID[d.id]))
		}
		var missing []uint64
		for o := range next {
			d, ok := ordinals[o]
			if !ok {
				missing = append(missing, o)
				continue
			}
			if prev, ok := ordinals[o-1]; o > 0 && ok && !d.nominal.After(prev.nominal) {
				fail(&v.gaps, "cron schedule %s: ordinal %d at %v, not after ordinal %d at %v", s.id, o, d.nominal.UTC(), o-1, prev.nominal.UTC())
			}
		}
		if len(missing) > 0 {
			v.gaps += len(missing) - 1
			fail(&v.gaps, "cron schedule %s (partition %d): gap, ordinals %v of 0..%d never delivered", s.id, s.partition, missing, next-1)
		}
	}
}

// lateness is how late an occurrence was enqueued, from its deliveries ds: its enqueue time
// (logged time) minus its nominal instant, or, when a delivery was received before that enqueue
// time (on the real clock: the silo that logged it ran ahead), that receipt minus the nominal
// instant. A logged time ahead of the real time would otherwise count as lateness.
func lateness(ds []delivery) time.Duration {
	enqueued := ds[0].enqueuedAt
	for _, d := range ds {
		if !d.handledAt.IsZero() && d.handledAt.Before(enqueued) {
			enqueued = d.handledAt
		}
	}
	return enqueued.Sub(ds[0].nominal)
}

// spanNumbers lists the generations of spans.
func spanNumbers(spans []generationSpan) []uint64 {
	out := make([]uint64, len(spans))
	for i, sp := range spans {
		out[i] = sp.generation
	}
	return out
}
