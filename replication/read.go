package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"slices"

	"github.com/orreryhq/orrery"
)

// ErrDriverStopped fails a Read when the driver stops before answering it (code Unavailable).
var ErrDriverStopped = errors.New("replication driver stopped")

// Read returns nil once group's state can be read by this replica as its leader: every entry
// committed before Read was called has been applied to the StateMachine (it reported the
// entries applied). It is the ReadIndex read of the package doc ("Reads"): Read queues the
// call; the driver's next round makes one ReadIndex request for every call queued on the group,
// with a context unique to the driver; a quorum's acknowledgement brings its ReadState; the
// call is answered once the group has no entries applying and Groups' applied index reached
// the ReadState's index.
//
// It fails with code Unavailable when this replica cannot read as group's leader at once
// (ErrUnknownGroup, ErrNotLeader, ErrNotCaughtUp), when it stops leading the term the request
// was made in before a quorum confirmed it (ErrNotLeader: Raft drops its pending reads when the
// term changes), and when the driver stops (ErrDriverStopped). When ctx ends first it fails
// with code DeadlineExceeded (the deadline passed) or Unavailable (ctx was canceled), wrapping
// ctx's error. Once confirmed, a call is answered even if this replica has stopped leading
// since: the confirmation already proved no other leader had committed past the index then.
func (d *Driver) Read(ctx context.Context, group int) error {
	if err := ctx.Err(); err != nil {
		return readContextError(group, err)
	}
	r := &reader{answer: make(chan error, 1)}
	d.mu.Lock()
	select {
	case <-d.stop:
		d.mu.Unlock()
		return orrery.Wrap(orrery.CodeUnavailable, ErrDriverStopped, "partition %d", group)
	default:
	}
	if _, _, err := d.cfg.Groups.leading(group); err != nil {
		d.mu.Unlock()
		return err
	}
	if d.reads.queued == nil {
		d.reads.queued = map[int][]*reader{}
	}
	d.reads.queued[group] = append(d.reads.queued[group], r)
	d.mu.Unlock()
	d.signal()
	select {
	case err := <-r.answer:
		return err
	case <-ctx.Done():
		d.mu.Lock()
		d.reads.abandon(group, r)
		d.mu.Unlock()
		return readContextError(group, ctx.Err())
	case <-d.stop:
		return orrery.Wrap(orrery.CodeUnavailable, ErrDriverStopped, "partition %d", group)
	case <-d.done:
		return orrery.Wrap(orrery.CodeUnavailable, ErrDriverStopped, "partition %d", group)
	}
}

// readContextError is the error of a Read whose ctx ended.
func readContextError(group int, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return orrery.Wrap(orrery.CodeDeadlineExceeded, err, "partition %d: read", group)
	}
	return orrery.Wrap(orrery.CodeUnavailable, err, "partition %d: read", group)
}

// reader is one Read call waiting for its answer.
type reader struct {
	answer chan error // buffered: receives the answer once
}

// readRequest is one ReadIndex request and the Read calls it answers.
type readRequest struct {
	group   int
	context []byte
	term    uint64 // the term it was made in
	index   uint64 // the ReadState's index, once confirmed
	readers []*reader
}

// answer answers every reader of q with err.
func (q *readRequest) answer(err error) {
	for _, r := range q.readers {
		r.answer <- err
	}
}

// driverReads is the Read calls a Driver has not answered yet, guarded by its mu.
//
// A call is queued until the next round makes a ReadIndex request for it; a group has at most
// one request in flight, and calls that come while one is in flight wait for the next (the
// index of the one in flight was taken before they were made). A request in flight lives
// until its ReadState arrives or this replica stops leading its term, so Raft and the driver
// hold at most one unconfirmed request per group; a confirmed one then waits for the state to
// apply through its index, which the committed entries already in this replica's log ensure.
type driverReads struct {
	lastContext uint64
	queued      map[int][]*reader
	inFlight    map[int]*readRequest
	confirmed   []*readRequest
}

// abandon takes a reader whose ctx ended out of whatever holds it.
func (rs *driverReads) abandon(group int, r *reader) {
	drop := func(readers []*reader) []*reader {
		return slices.DeleteFunc(readers, func(x *reader) bool { return x == r })
	}
	rs.queued[group] = drop(rs.queued[group])
	if q := rs.inFlight[group]; q != nil {
		q.readers = drop(q.readers)
	}
	for _, q := range rs.confirmed {
		if q.group == group {
			q.readers = drop(q.readers)
		}
	}
}

// count is the number of queued calls and of requests in flight or confirmed.
func (rs *driverReads) count() int {
	n := len(rs.inFlight) + len(rs.confirmed)
	for _, readers := range rs.queued {
		n += len(readers)
	}
	return n
}

// issueReads makes a ReadIndex request for each group with queued calls and none in flight,
// failing the calls when Groups refuses. Called with d.mu held, before Ready.
func (d *Driver) issueReads() {
	rs := &d.reads
	if len(rs.queued) == 0 {
		return
	}
	for _, group := range slices.Sorted(maps.Keys(rs.queued)) {
		readers := rs.queued[group]
		if len(readers) == 0 {
			delete(rs.queued, group)
			continue
		}
		if rs.inFlight[group] != nil {
			continue
		}
		delete(rs.queued, group)
		rs.lastContext++
		q := &readRequest{group: group, context: binary.BigEndian.AppendUint64(nil, rs.lastContext), readers: readers}
		if err := d.cfg.Groups.ReadIndex(group, q.context); err != nil {
			q.answer(err)
			continue
		}
		st, _ := d.cfg.Groups.Status(group)
		q.term = st.Term
		if rs.inFlight == nil {
			rs.inFlight = map[int]*readRequest{}
		}
		rs.inFlight[group] = q
	}
}

// confirmReads moves the requests a round's Reads confirm from in flight to confirmed; a
// ReadState of a request the driver no longer tracks is ignored. Called with d.mu held.
func (d *Driver) confirmReads(round *Round) {
	rs := &d.reads
	for _, state := range round.Reads {
		q := rs.inFlight[state.Group]
		if q == nil || !slices.Equal(q.context, state.Context) {
			continue
		}
		delete(rs.inFlight, state.Group)
		q.index = state.Index
		rs.confirmed = append(rs.confirmed, q)
	}
}

// settleReads, after a round's Advance, fails the requests in flight whose term this replica
// no longer leads. Called with d.mu held.
func (d *Driver) settleReads() {
	rs := &d.reads
	for group, q := range rs.inFlight {
		if _, term, err := d.cfg.Groups.leading(group); err == nil && term == q.term {
			continue
		}
		delete(rs.inFlight, group)
		q.answer(orrery.Wrap(orrery.CodeUnavailable, ErrNotLeader, "partition %d: stopped leading term %d before a quorum confirmed the read", group, q.term))
	}
}

// answerReads answers the confirmed requests whose groups have applied through their
// indexes: the group is not in busy (taken after the entries up to Groups' applied index
// were handed over), so every entry up to that index has applied. Called with d.mu held.
func (d *Driver) answerReads(busy map[int]bool) {
	rs := &d.reads
	rs.confirmed = slices.DeleteFunc(rs.confirmed, func(q *readRequest) bool {
		if busy[q.group] {
			return false
		}
		if st, _ := d.cfg.Groups.Status(q.group); st.AppliedIndex < q.index {
			return false
		}
		q.answer(nil)
		return true
	})
}
