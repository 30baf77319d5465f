package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// writeSiloLogs writes each process's log to dir/silo-<n>-pid<pid>.log.
func writeSiloLogs(dir string, processes []*SiloProcess) error {
	var errs []error
	for n, p := range processes {
		path := filepath.Join(dir, fmt.Sprintf("silo-%d-pid%d.log", n, p.PID()))
		errs = append(errs, os.WriteFile(path, []byte(p.Log()), 0o644))
	}
	return errors.Join(errs...)
}

// historyLine is one line of history.jsonl: a schedule, a cron schedule, a timer, an enqueue,
// a delivery, a saga call, a replayed command or a schedule call.
type historyLine struct {
	Kind       string     `json:"kind"` // schedule, cron, timer, enqueued, delivery, saga, replay, schedule_call
	ID         string     `json:"id"`
	Lane       string     `json:"lane"`
	Partition  int        `json:"partition"`
	First      *time.Time `json:"first,omitempty"`
	Due        *time.Time `json:"due,omitempty"`
	Next       *uint64    `json:"next_ordinal,omitempty"`
	Cancelled  *time.Time `json:"cancelled,omitempty"`
	Paused     bool       `json:"paused_ever,omitempty"`
	Expression string     `json:"expression,omitempty"` // a cron schedule's, in cronZone
	Origin     string     `json:"origin,omitempty"`
	Ordinal    *uint64    `json:"ordinal,omitempty"`
	Generation uint64     `json:"generation,omitempty"`
	Manual     bool       `json:"manual,omitempty"`
	Nominal    *time.Time `json:"nominal,omitempty"`
	EnqueuedAt *time.Time `json:"enqueued_at,omitempty"`
	Count      uint32     `json:"delivery_count,omitempty"`
	ReceivedAt *time.Time `json:"received_at,omitempty"`
	NeverAcked bool       `json:"never_acked,omitempty"`
	// A saga timeout delivery: the saga, the Waiting revision it expired and its deadline.
	Saga            string     `json:"saga,omitempty"`
	WaitingRevision uint64     `json:"waiting_revision,omitempty"`
	Deadline        *time.Time `json:"deadline,omitempty"`
	// A saga call (ID is the saga's) or a schedule call (ID is the schedule's): what it asked,
	// when, and what came back (returned is absent for an unknown outcome).
	Op       string     `json:"op,omitempty"`
	Expected *uint64    `json:"expected_revision,omitempty"`
	Call     *time.Time `json:"call,omitempty"`
	Returned *time.Time `json:"returned,omitempty"`
	Outcome  string     `json:"outcome,omitempty"`
	Error    string     `json:"error,omitempty"`
	Revision uint64     `json:"revision,omitempty"`
	Phase    string     `json:"phase,omitempty"`
	Final    bool       `json:"final_read,omitempty"`
	// State is what an ok read of a schedule found: running, paused or cancelled.
	State string `json:"state,omitempty"`
	// A replay (ID is the command id): the call, and whether its receipt was the first's.
	What  string `json:"what,omitempty"`
	Match *bool  `json:"receipt_matched,omitempty"`
}

// writeHistory writes h to path, one JSON object a line.
func writeHistory(path string, h history) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(f)
	enc := json.NewEncoder(out)
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	for _, s := range h.schedules {
		key := s.lane.GetKey()
		line := historyLine{Kind: "schedule", ID: s.id, Lane: key, Partition: s.partition, First: at(s.first),
			Cancelled: at(h.cancelledAt[key]), Paused: h.paused[key]}
		if next, ok := h.next[key]; ok {
			line.Next = &next
		}
		err = errors.Join(err, enc.Encode(line))
	}
	for _, s := range h.crons {
		key := s.lane.GetKey()
		line := historyLine{Kind: "cron", ID: s.id, Lane: key, Partition: s.partition, Cancelled: at(h.cancelledAt[key]),
			Expression: h.cronHours.expression()}
		if next, ok := h.next[key]; ok {
			line.Next = &next
		}
		err = errors.Join(err, enc.Encode(line))
	}
	for _, tm := range h.timers {
		err = errors.Join(err, enc.Encode(historyLine{Kind: "timer", ID: tm.id, Lane: tm.lane.GetKey(), Partition: tm.partition, Due: at(tm.due)}))
	}
	for id, key := range h.enqueued {
		err = errors.Join(err, enc.Encode(historyLine{Kind: "enqueued", ID: id, Lane: key}))
	}
	for _, d := range h.deliveries {
		line := historyLine{Kind: "delivery", ID: d.id, Lane: d.key, Partition: d.partition, Origin: d.origin.String(),
			EnqueuedAt: at(d.enqueuedAt), Count: d.count, ReceivedAt: at(d.handledAt), NeverAcked: d.dropped}
		if !d.nominal.IsZero() {
			ordinal := d.ordinal
			line.Ordinal, line.Nominal = &ordinal, at(d.nominal)
			line.Generation, line.Manual = d.generation, d.manual
		}
		if o := d.timeoutOf; o != nil {
			line.Saga, line.WaitingRevision, line.Deadline = o.GetSagaId(), o.GetWaitingRevision(), at(time.UnixMicro(o.GetDeadlineUnixMicros()))
		}
		err = errors.Join(err, enc.Encode(line))
	}
	for _, op := range h.sagaOps {
		expected := op.expected
		line := historyLine{Kind: "saga", ID: op.sagaID, Lane: op.key, Op: string(op.kind), Deadline: at(op.deadline), Call: at(op.call),
			Returned: at(op.returned), Outcome: string(op.outcome), Error: op.err, Revision: op.revision, Final: op.final}
		if op.kind != sagaRead {
			line.Expected = &expected
		}
		if op.outcome == outcomeOK {
			line.Phase = phaseName(op.phase)
		}
		err = errors.Join(err, enc.Encode(line))
	}
	for _, op := range h.scheduleOps {
		expected := op.expected
		line := historyLine{Kind: "schedule_call", ID: op.scheduleID, Lane: op.key, Op: string(op.kind), Call: at(op.call),
			Returned: at(op.returned), Outcome: string(op.outcome), Error: op.err, Revision: op.revision}
		if op.kind != scheduleRead {
			line.Expected = &expected
		}
		if op.kind == scheduleRead && op.outcome == outcomeOK {
			line.State = readState(op)
		}
		err = errors.Join(err, enc.Encode(line))
	}
	for _, r := range h.replays {
		line := historyLine{Kind: "replay", ID: r.commandID, What: r.what, Error: r.againErr}
		if r.again != nil {
			matched := bytes.Equal(r.first, r.again)
			line.Match = &matched
		}
		err = errors.Join(err, enc.Encode(line))
	}
	return errors.Join(err, out.Flush(), f.Close())
}

// readState names what an ok read of a schedule found: cancelled, paused or running.
func readState(op scheduleOp) string {
	switch {
	case op.cancelled:
		return "cancelled"
	case op.paused:
		return "paused"
	default:
		return "running"
	}
}
