package partition

import (
	"github.com/orreryhq/orrery/persistence"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/replication"
)

// EnqueueLatenessObserver receives, for each occurrence a due command enqueued on partition,
// its schedule's id and its enqueue lateness: the logged time of the entry that enqueued it
// minus its nominal due instant.
type EnqueueLatenessObserver func(partition int, scheduleID string, lateness time.Duration)

// ObserveEnqueueLateness makes fn receive the enqueue lateness of every occurrence a due
// command enqueues from now on, on the replica that leads its partition as it applies the
// command (followers applying the same entry do not report it); nil stops it. fn runs on the
// partition's apply goroutine and must not block. While none is set the apply reads nothing
// for it.
func (h *Host) ObserveEnqueueLateness(fn EnqueueLatenessObserver) {
	if fn == nil {
		h.lateness.Store(nil)
		return
	}
	h.lateness.Store(&fn)
}

// StageObserver receives how long a command answered on partition spent in stage (see
// engine.Stage).
type StageObserver func(partition int, stage engine.Stage, took time.Duration)

// ObserveStages makes fn receive the stage timings of every command a partition grain of this
// silo answers from now on after its entry applied (engine.Ready.Stages); nil stops it. fn runs
// on the grain's goroutine and must not block.
func (h *Host) ObserveStages(fn StageObserver) {
	if fn == nil {
		h.stages.Store(nil)
		return
	}
	h.stages.Store(&fn)
}

// InspectDenialObserver receives an inspection a grain of this silo refused Unauthorized: its
// partition, its principal, its target (the InspectRequest field name: "schedule", "audit")
// and the denial's message. Such a read writes no partition state, so it is not in the audit
// log (package grains/audit); the silo logs and counts it.
type InspectDenialObserver func(partition int, principal, target, message string)

// ObserveInspectDenials makes fn receive every inspection this silo's grains refuse
// Unauthorized from now on; nil stops it. fn runs on the grain's goroutine and must not block.
func (h *Host) ObserveInspectDenials(fn InspectDenialObserver) {
	if fn == nil {
		h.inspectDenials.Store(nil)
		return
	}
	h.inspectDenials.Store(&fn)
}

// inspectDenied tells the observer, if any, of an inspection refused Unauthorized.
func (h *Host) inspectDenied(partition int, req *orreryv1.InspectRequest, reply *orreryv1.InspectReply) {
	fn := h.inspectDenials.Load()
	if fn == nil || reply.GetError().GetCode() != orreryv1.ErrorCode_ERROR_CODE_UNAUTHORIZED {
		return
	}
	target := ""
	if f := req.ProtoReflect().WhichOneof(req.ProtoReflect().Descriptor().Oneofs().ByName("target")); f != nil {
		target = string(f.Name())
	}
	(*fn)(partition, req.GetPrincipal(), target, reply.GetError().GetMessage())
}

// ObserveRounds makes fn receive the timing of every Raft round of this silo's groups from now
// on (replication.Driver.ObserveRounds).
func (h *Host) ObserveRounds(fn func(replication.RoundTiming)) { h.driver.ObserveRounds(fn) }

// Queued is how many commands partition n's grain on this silo holds, proposed and not yet
// applied or parked as long polls (engine.Engine.Queued), as of its last step; 0 when no
// grain is attached.
func (h *Host) Queued(n int) int {
	m, err := h.machine(n)
	if err != nil {
		return 0
	}
	return int(m.queued.Load())
}

// DueHeadEntries is how many entries of partition n's due index its grain on this silo holds
// in memory (engine.Engine.DueHeadEntries: those due within a few seconds of its last scan, at
// most 4096), as of its last step; 0 when no grain is attached.
func (h *Host) DueHeadEntries(n int) int {
	m, err := h.machine(n)
	if err != nil {
		return 0
	}
	return int(m.dueHead.Load())
}

// DiskBytes is the size of the silo store's files (persistence.SiloStore.DiskBytes).
func (h *Host) DiskBytes() (int64, error) { return h.store.DiskBytes() }

// Written is what the silo store's applies and Raft rounds have written since it opened
// (persistence.SiloStore.Written).
func (h *Host) Written() persistence.WriteCounts { return h.store.Written() }

// FreeDiskBytes is the space available on the silo store's disk
// (persistence.SiloStore.FreeDiskBytes).
func (h *Host) FreeDiskBytes() (uint64, error) { return h.store.FreeDiskBytes() }

// observeEnqueues reports the enqueue lateness of the occurrences a due command's emits
// enqueued, reading each message back from the apply's view (where it was just written), when
// an observer is set and this replica leads the partition.
func (m *machine) observeEnqueues(v kv.Reader, b *orreryv1.Batch, receipt *orreryv1.Receipt) {
	observe := m.host.lateness.Load()
	if observe == nil || !m.host.Leads(m.n) {
		return
	}
	mutations := b.GetMutations()
	for i, res := range receipt.GetResults() {
		if i >= len(mutations) {
			return
		}
		emit := mutations[i].GetEmitOccurrences()
		if emit == nil {
			continue
		}
		for _, id := range res.GetSchedule().GetEnqueuedIds() {
			msg := &orreryv1.QueueMessage{}
			found, err := record.Load(v, keys.MessageKey(emit.GetLane(), id), msg)
			if err != nil || !found || msg.GetOccurrence() == nil {
				continue
			}
			lateMicros := msg.GetEnqueuedAtUnixMicros() - msg.GetOccurrence().GetNominalDueAtUnixMicros()
			(*observe)(m.n, msg.GetOccurrence().GetScheduleId(), time.Duration(lateMicros)*time.Microsecond)
		}
	}
}
