package engine

import (
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// scanDue answers a due coordinator's bounded due scan (the ScanDue event) at now, from the due
// head when it covers the scan. What the answer says of the next due instant bounds the notices that follow.
func (e *Engine) scanDue(now time.Time, req *orreryv1.ScanDueRequest) *orreryv1.ScanDueReply {
	if e.stopped {
		return &orreryv1.ScanDueReply{Error: orrery.Errorf(orrery.CodeUnavailable, "partition %d is stopping", e.cfg.Partition).Proto()}
	}
	maxRefs := int(req.GetMaxRefs())
	if maxRefs <= 0 || maxRefs > MaxScanRefs {
		maxRefs = MaxScanRefs
	}
	at := e.readTime(now)
	res, err := e.scanHead(at, due.Budget{MaxRefs: maxRefs, After: req.GetAfter(), FromMicros: e.dueFloor})
	if err != nil {
		return &orreryv1.ScanDueReply{Error: orrery.AsError(err).Proto()}
	}
	e.learnFromScan(res)
	return &orreryv1.ScanDueReply{
		Refs: res.Refs, More: res.More, Continuation: res.Continuation, NextDueAtUnixMicros: res.NextDueAtMicros,
		LoggedTimeUnixMicros: at, ActivationEpoch: e.state.Term(),
	}
}

// scanHead scans the due head at the read time at within budget, loading the head from the
// state when it does not cover at, and reading the state past it for a backlog beyond its
// bound. A scan from the due floor raises it.
func (e *Engine) scanHead(at int64, budget due.Budget) (*due.Result, error) {
	res, covered, err := e.head.Scan(at, budget)
	if !covered && !e.head.Covers(at) {
		if err := e.state.View(func(r kv.Reader) error { return e.head.Load(r, e.dueFloor, at+dueHeadAhead) }); err != nil {
			e.head.Reset()
			e.cfg.Logger.Warn("partition could not load its due head", "partition", e.cfg.Partition, "err", err)
		}
		res, covered, err = e.head.Scan(at, budget)
	}
	if !covered { // a backlog beyond the head's bound: read the state
		err = e.state.View(func(r kv.Reader) error {
			var err error
			res, err = due.ScanDue(r, at, budget)
			return err
		})
	}
	if err == nil && budget.After == nil {
		e.raiseDueFloor(res)
	}
	return res, err
}

// NextDue reads the partition's earliest due instant (zero when the index is empty), starting
// at the due floor, and raises the floor to it.
func (e *Engine) NextDue() (int64, error) {
	var next int64
	err := e.state.View(func(r kv.Reader) error {
		res, err := due.ScanDue(r, input.MaxInstantMicros, due.Budget{MaxRefs: 1, FromMicros: e.dueFloor})
		if err == nil && len(res.Refs) == 1 {
			next = res.Refs[0].GetDueAtUnixMicros()
		}
		return err
	})
	if err == nil {
		if next > 0 {
			e.dueFloor = next
		} else {
			e.dueFloor = input.MaxInstantMicros // empty: the next entry written lowers it
		}
	}
	return next, err
}

// lowerDueFloor accounts for due-index entries an apply wrote.
func (e *Engine) lowerDueFloor(minWritten int64) {
	if minWritten > 0 && e.dueFloor > 0 && minWritten < e.dueFloor {
		e.dueFloor = minWritten
	}
}

// raiseDueFloor takes a due scan that began at the due floor (no continuation): its first
// entry is the partition's earliest and raises the floor, so the next scans and head loads do
// not step over the entries emitted since. An entry a later apply writes lowers it again
// (lowerDueFloor).
func (e *Engine) raiseDueFloor(res *due.Result) {
	first := res.NextDueAtMicros
	if len(res.Refs) > 0 {
		first = res.Refs[0].GetDueAtUnixMicros()
	}
	switch {
	case first > 0:
		e.dueFloor = max(e.dueFloor, first)
	case !res.More:
		e.dueFloor = input.MaxInstantMicros // empty: the next entry written lowers it
	}
}

// learnFromScan takes what a coordinator's due scan answered: the coordinator wakes at or
// before the scan's next-due instant, which bounds what a later notice must undercut; a
// partial scan (more refs follow) tells nothing yet.
func (e *Engine) learnFromScan(res *due.Result) {
	e.dueTold = input.MaxInstantMicros
	if !res.More && res.NextDueAtMicros > 0 {
		e.dueTold = res.NextDueAtMicros
	}
}

// reportNextDue reads the partition's earliest due instant and tells the due coordinator (on
// Open and after a snapshot, when nothing is known of what the coordinator knows).
func (e *Engine) reportNextDue() {
	next, err := e.NextDue()
	if err != nil {
		e.cfg.Logger.Warn("partition could not read its next due instant", "partition", e.cfg.Partition, "err", err)
		e.dueTold = 0
		return
	}
	e.dueTold = next
	if next == 0 {
		e.dueTold = input.MaxInstantMicros
	}
	e.notice(next)
}

// noticeDueWritten tells the due coordinator of an apply's earliest written due entry when it
// is earlier than what the coordinator wakes for (or that is unknown). It needs no read: the
// entry itself is the news. Later entries are not reported (the coordinator's scans and emit
// results carry them), which saves a due-index seek on every apply.
func (e *Engine) noticeDueWritten(minWritten int64) {
	if e.dueTold == 0 {
		e.reportNextDue()
		return
	}
	if minWritten <= 0 || minWritten >= e.dueTold {
		return
	}
	e.dueTold = minWritten
	e.notice(minWritten)
}

// notice asks for a next-due notice to the due coordinator.
func (e *Engine) notice(nextDueMicros int64) {
	e.ready.Notices = append(e.ready.Notices, &orreryv1.NextDueNotice{
		Partition: int32(e.cfg.Partition), NextDueAtUnixMicros: nextDueMicros, ActivationEpoch: e.state.Term()})
}
