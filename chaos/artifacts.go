package chaos

import (
	"bufio"
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

// historyLine is one line of history.jsonl: a schedule, a timer, an enqueue or a delivery.
type historyLine struct {
	Kind       string     `json:"kind"` // schedule, timer, enqueued, delivery
	ID         string     `json:"id"`
	Lane       string     `json:"lane"`
	Partition  int        `json:"partition"`
	First      *time.Time `json:"first,omitempty"`
	Due        *time.Time `json:"due,omitempty"`
	Next       *uint64    `json:"next_ordinal,omitempty"`
	Cancelled  *time.Time `json:"cancelled,omitempty"`
	Paused     bool       `json:"paused_ever,omitempty"`
	Origin     string     `json:"origin,omitempty"`
	Ordinal    *uint64    `json:"ordinal,omitempty"`
	Nominal    *time.Time `json:"nominal,omitempty"`
	EnqueuedAt *time.Time `json:"enqueued_at,omitempty"`
	Count      uint32     `json:"delivery_count,omitempty"`
	ReceivedAt *time.Time `json:"received_at,omitempty"`
	NeverAcked bool       `json:"never_acked,omitempty"`
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
		}
		err = errors.Join(err, enc.Encode(line))
	}
	return errors.Join(err, out.Flush(), f.Close())
}
