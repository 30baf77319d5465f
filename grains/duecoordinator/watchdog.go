package duecoordinator

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/duecoordinator/backoff"
)

// Liveness states of a due record the watchdog reports.
const (
	// LivenessLate: the record's due instant is more than Config.LateAfter past, by the
	// partition's logged time, and it has not been emitted.
	LivenessLate = "late"
	// LivenessFailing: the record's last emit or expiry failed for a lasting reason (a full
	// lane, a creator without its grant, ...) and it is on backoff.
	LivenessFailing = "failing"
)

// watchForget is how long a reported record may go unseen by scans and dispatches before the
// watchdog forgets it as recovered (it left the due index, or lies beyond the pages rounds
// read).
const watchForget = backoff.BackoffForget

// MaxWatchedRecords bounds the records the watchdog reports at once (and so its log lines and
// memory after an outage that left many records due): beyond it a record entering a state is
// neither logged nor listed, and one warning says the report is cut.
const MaxWatchedRecords = 1000

// Liveness is the watchdog's report of one due record that is late or failing.
type Liveness struct {
	// Partition is the partition holding the record.
	Partition int
	// Kind, Lane and ID name the record.
	Kind orreryv1.DueKind
	Lane *orreryv1.Lane
	ID   string
	// State is LivenessLate or LivenessFailing.
	State string
	// Reason says why: how late, or the error of the last failed emit.
	Reason string
	// DueAt is the record's due instant, on the partition's clock.
	DueAt time.Time
	// Since is when the record entered State, on the coordinator's clock.
	Since time.Time
}

// recordKey names a due record whatever its CAS token.
type recordKey struct {
	kind                  orreryv1.DueKind
	namespace, queue, key string
	id                    string
}

func recordKeyOf(ref *orreryv1.DueRef) recordKey {
	l := ref.GetLane()
	return recordKey{ref.GetKind(), l.GetNamespace(), l.GetQueue(), l.GetKey(), ref.GetId()}
}

// watched is one reported record.
type watched struct {
	Liveness
	code     orrery.Code // of a failing record's last error
	lastSeen time.Time
}

// watchdog keeps the due records of the owned partitions that are late or failing, logs each
// change of their state once (became late, became failing and why, recovered) and counts the
// changes. Rounds and dispatches of several partitions call it concurrently.
type watchdog struct {
	lateAfter time.Duration
	log       *slog.Logger
	changes   atomic.Uint64

	mu      sync.Mutex
	records map[recordKey]*watched
	full    bool // a record was left out since the watchdog last had room
}

func newWatchdog(lateAfter time.Duration, log *slog.Logger) *watchdog {
	return &watchdog{lateAfter: lateAfter, log: log, records: map[recordKey]*watched{}}
}

// lateBy is how far past its due instant ref is at the partition's logged time (on the
// coordinator's clock when the reply carries none).
func lateBy(ref *orreryv1.DueRef, loggedMicros int64, now time.Time) time.Duration {
	if loggedMicros == 0 {
		loggedMicros = now.UnixMicro()
	}
	return time.Duration(loggedMicros-ref.GetDueAtUnixMicros()) * time.Microsecond
}

// observe takes the refs of one scan page: those due more than lateAfter ago become late
// (unless already reported), those due since are no longer late.
func (w *watchdog) observe(partitionID int, refs []*orreryv1.DueRef, loggedMicros int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ref := range refs {
		k := recordKeyOf(ref)
		e := w.records[k]
		late := lateBy(ref, loggedMicros, now)
		switch {
		case late > w.lateAfter && e == nil:
			w.enterLocked(k, partitionID, ref, LivenessLate, "due "+late.Round(time.Millisecond).String()+" ago and not emitted", 0, now)
		case e != nil && e.State == LivenessLate && late <= w.lateAfter:
			w.recoverLocked(k, "due on time", now)
		case e != nil:
			e.lastSeen, e.DueAt = now, time.UnixMicro(ref.GetDueAtUnixMicros())
		}
	}
}

// failed reports ref failing with err; a record already failing for the same code is not
// reported again.
func (w *watchdog) failed(partitionID int, ref *orreryv1.DueRef, err error, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := recordKeyOf(ref)
	if e := w.records[k]; e != nil && e.State == LivenessFailing && e.code == orrery.CodeOf(err) {
		e.lastSeen, e.Reason = now, err.Error()
		return
	}
	w.enterLocked(k, partitionID, ref, LivenessFailing, err.Error(), orrery.CodeOf(err), now)
}

// succeeded takes a ref whose mutation applied: it has recovered unless its next due instant
// is itself more than lateAfter past the logged time (a backlog), which keeps it late.
func (w *watchdog) succeeded(partitionID int, ref *orreryv1.DueRef, nextDueMicros, loggedMicros int64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := recordKeyOf(ref)
	if nextDueMicros != 0 {
		next := &orreryv1.DueRef{Kind: ref.GetKind(), Lane: ref.GetLane(), Id: ref.GetId(), DueAtUnixMicros: nextDueMicros}
		if late := lateBy(next, loggedMicros, now); late > w.lateAfter {
			if e := w.records[k]; e == nil || e.State != LivenessLate {
				w.enterLocked(k, partitionID, next, LivenessLate, "backlog: next due "+late.Round(time.Millisecond).String()+" ago", 0, now)
			} else {
				e.lastSeen = now
			}
			return
		}
	}
	w.recoverLocked(k, "emitted", now)
}

// movedOn takes a ref answered with a stale token: its record changed (a new generation, a
// deletion), so whatever was reported of it no longer holds.
func (w *watchdog) movedOn(ref *orreryv1.DueRef, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recoverLocked(recordKeyOf(ref), "record changed", now)
}

// prune forgets, as recovered, records no scan or dispatch saw for watchForget.
func (w *watchdog) prune(partitionID int, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, e := range w.records {
		if e.Partition == partitionID && now.Sub(e.lastSeen) > watchForget {
			w.recoverLocked(k, "no longer seen due", now)
		}
	}
}

// forget drops the records of a partition no longer owned without reporting them: the
// partition's new coordinator reports them again.
func (w *watchdog) forget(partitionID int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, e := range w.records {
		if e.Partition == partitionID {
			delete(w.records, k)
		}
	}
}

func (w *watchdog) enterLocked(k recordKey, partitionID int, ref *orreryv1.DueRef, state, reason string, code orrery.Code, now time.Time) {
	if w.records[k] == nil && len(w.records) >= MaxWatchedRecords {
		if !w.full {
			w.full = true
			w.log.Warn("due coordinator: more records late or failing than the watchdog reports; the rest are left out", "max", MaxWatchedRecords)
		}
		return
	}
	if len(w.records) < MaxWatchedRecords/2 {
		w.full = false
	}
	e := &watched{Liveness: Liveness{
		Partition: partitionID, Kind: ref.GetKind(), Lane: ref.GetLane(), ID: ref.GetId(),
		State: state, Reason: reason, DueAt: time.UnixMicro(ref.GetDueAtUnixMicros()), Since: now,
	}, code: code, lastSeen: now}
	w.records[k] = e
	w.changes.Add(1)
	w.log.Warn("due coordinator: "+kindName(e.Kind)+" "+state, "partition", partitionID, "lane", laneName(e.Lane), "id", e.ID,
		"due_at", e.DueAt.UTC(), "reason", reason)
}

func (w *watchdog) recoverLocked(k recordKey, why string, now time.Time) {
	e := w.records[k]
	if e == nil {
		return
	}
	delete(w.records, k)
	w.changes.Add(1)
	w.log.Info("due coordinator: "+kindName(e.Kind)+" recovered", "partition", e.Partition, "lane", laneName(e.Lane), "id", e.ID,
		"was", e.State, "for", now.Sub(e.Since), "how", why)
}

// list returns the reported records, by partition, lane and id.
func (w *watchdog) list() []Liveness {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Liveness, 0, len(w.records))
	for _, e := range w.records {
		out = append(out, e.Liveness)
	}
	slices.SortFunc(out, func(a, b Liveness) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		if c := strings.Compare(laneName(a.Lane), laneName(b.Lane)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// find returns the report of one record.
func (w *watchdog) find(k recordKey) (Liveness, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.records[k]; e != nil {
		return e.Liveness, true
	}
	return Liveness{}, false
}

// counts returns how many records of partitionID are late and failing.
func (w *watchdog) counts(partitionID int) (late, failing int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.records {
		if e.Partition != partitionID {
			continue
		}
		if e.State == LivenessLate {
			late++
		} else {
			failing++
		}
	}
	return late, failing
}

func kindName(k orreryv1.DueKind) string {
	if k == orreryv1.DueKind_DUE_KIND_SAGA {
		return "saga"
	}
	return "schedule"
}

func laneName(l *orreryv1.Lane) string {
	return l.GetNamespace() + "/" + l.GetQueue() + "/" + l.GetKey()
}
