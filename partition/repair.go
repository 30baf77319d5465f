package partition

import (
	"bytes"
	"maps"
	"slices"
	"time"

	"github.com/orreryhq/orrery/replication"
)

// Bounds of a repair (see repair).
const (
	// RepairAttempts is how many times a rebuild of one divergent replica is sent before
	// this silo gives up until the next check finds it again.
	RepairAttempts = 5
	// RepairRetry spaces the attempts: a divergent leader may not have handed its leadership
	// over yet, or the stream broke.
	RepairRetry = 2 * time.Second
	// HandOverTimeout bounds how long a divergent leader tries to hand its leadership to a
	// replica of the majority before it asks that replica to rebuild it.
	HandOverTimeout = 10 * time.Second
)

// RepairRequester is implemented by a Transport (SetTransport) that carries a request to
// rebuild a divergent replica to another silo (cluster/raftnet does).
type RepairRequester interface {
	SendRepairRequest(to uint64, group int, replica uint64)
}

// Repair is the last rebuild this silo sent of a divergent replica of a partition.
type Repair struct {
	// Replica is the rebuilt replica (silo id); Index the applied index of the state sent.
	Replica, Index uint64
	// At is when its outcome arrived; Err is nil once the replica installed it.
	At  time.Time
	Err error
}

// repair rebuilds the divergent replicas a verdict with a majority named from the majority's
// state (replication's rebuild: the replica keeps its log and its vote, its state is replaced).
// When this leader's own replica is in the majority it sends its state to each of them.
// Otherwise it hands its leadership to a replica of the majority and asks that one to send its
// state to every divergent replica, this one included (handOver). Without a majority there is
// nothing to rebuild from, and nothing is done.
func (h *Host) repair(n int, v Verdict) {
	if v.Majority == nil || len(v.Divergent) == 0 {
		return
	}
	self := h.SiloID()
	if bytes.Equal(v.Sums[self], v.Majority) {
		for _, r := range v.Divergent {
			h.sendRebuild(n, r, 1)
		}
		return
	}
	for _, r := range slices.Sorted(maps.Keys(v.Sums)) {
		if r != self && bytes.Equal(v.Sums[r], v.Majority) {
			h.repairing.Add(1)
			go func() {
				defer h.repairing.Done()
				h.handOver(n, r, v.Divergent)
			}()
			return
		}
	}
}

// handOver hands partition n's leadership to source, a replica with the majority's state, and
// once this replica no longer leads asks source to rebuild each divergent replica.
func (h *Host) handOver(n int, source uint64, divergent []uint64) {
	h.log.Warn("this replica's state diverged from the majority's: handing the leadership over before it is rebuilt",
		"partition", n, "to", formatReplica(source))
	deadline := h.cfg.Clock.Now().Add(HandOverTimeout)
	var asked time.Time
	for h.Leads(n) {
		if h.cfg.Clock.Now().After(deadline) {
			h.log.Error("a divergent replica could not hand its leadership over; it is rebuilt after a later check",
				"partition", n, "to", formatReplica(source))
			return
		}
		if now := h.cfg.Clock.Now(); now.Sub(asked) >= time.Second {
			asked = now
			if err := h.TransferLeadership(n, source); err != nil {
				h.log.Warn("leadership transfer to a replica of the majority failed", "partition", n, "to", formatReplica(source), "err", err)
			}
		}
		select {
		case <-h.stopping:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	t := h.transport.t.Load()
	if t == nil {
		return
	}
	requester, ok := (*t).(RepairRequester)
	if !ok {
		return
	}
	for _, r := range divergent {
		requester.SendRepairRequest(source, n, r)
	}
}

// RepairRequested takes another silo's request to rebuild replica's state of partition n from
// this replica's (a divergent leader's, handOver). It does not block.
func (h *Host) RepairRequested(from uint64, n int, replica uint64) {
	if _, err := h.machine(n); err != nil || replica == h.SiloID() {
		return
	}
	h.log.Info("rebuilding a divergent replica at another replica's request", "partition", n,
		"replica", formatReplica(replica), "requested_by", formatReplica(from))
	h.sendRebuild(n, replica, 1)
}

// sendRebuild sends this replica's state of partition n, a consistent read at its applied
// index, to replica to as a rebuild; its outcome goes to rebuilt.
func (h *Host) sendRebuild(n int, to uint64, attempt int) {
	select {
	case <-h.stopping:
		return
	default:
	}
	m, err := h.machine(n)
	if err != nil {
		return
	}
	snap, err := m.state.Snapshot()
	if err != nil {
		h.rebuilt(n, to, 0, attempt, err)
		return
	}
	mark := snap.Mark()
	meta := replication.SnapshotMeta{Index: mark.Index, LoggedTimeMicros: mark.LoggedTimeMicros}
	h.log.Info("rebuilding a divergent replica from this replica's state", "partition", n, "replica", formatReplica(to),
		"index", mark.Index, "attempt", attempt)
	h.transport.SendSnapshot(to, replication.OutboundSnapshot{
		Group:   n,
		Raft:    replication.RebuildMessage(h.SiloID(), to, meta),
		Chunks:  snapshotReader{snap},
		Rebuild: true,
		Done:    func(err error) { h.rebuilt(n, to, mark.Index, attempt, err) },
	})
}

// rebuilt records the outcome of a rebuild of replica to at index, and sends it again after
// RepairRetry while attempts remain.
func (h *Host) rebuilt(n int, to, index uint64, attempt int, err error) {
	c := h.checks
	c.mu.Lock()
	st := c.of(n)
	st.LastRepair = Repair{Replica: to, Index: index, At: h.cfg.Clock.Now(), Err: err}
	if err == nil {
		st.Repairs++
	}
	c.mu.Unlock()
	switch {
	case err == nil:
		// WARN, as the ERROR that found it: an operator reading warnings sees the repair.
		h.log.Warn("divergent replica rebuilt: it installed this replica's state", "partition", n, "replica", formatReplica(to), "index", index)
	case attempt < RepairAttempts:
		h.log.Warn("rebuild of a divergent replica failed; trying again", "partition", n, "replica", formatReplica(to),
			"attempt", attempt, "retry_in", RepairRetry, "err", err)
		h.repairing.Add(1)
		retry := make(chan struct{})
		timer := h.cfg.Clock.AfterFunc(RepairRetry, func() { close(retry) })
		go func() {
			defer h.repairing.Done()
			select {
			case <-h.stopping:
				timer.Stop()
			case <-retry:
				h.sendRebuild(n, to, attempt+1)
			}
		}()
	default:
		h.log.Error("rebuild of a divergent replica failed; giving up until a check finds it again", "partition", n,
			"replica", formatReplica(to), "attempts", attempt, "err", err)
	}
}
