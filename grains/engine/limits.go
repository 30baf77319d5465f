package engine

import (
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// LimitsPrincipal is the principal of the engine's own SetLimits commands.
const LimitsPrincipal = input.SystemPrincipalPrefix + "limits"

// adoptLimits reads the limits the partition applies under, for the engine's own checks, and
// proposes this silo's configured ones (Config.Limits) when they differ: the leader decides the
// limits, and every replica applies under them from that entry on.
//
// A partition below batch.ApplyVersionPriority keeps the default priority step: its limits are
// proposed without one (a replica of an older release refuses a limit it does not know), and
// a leader proposes the step once the partition's apply version takes it (applyVersionSet).
func (e *Engine) adoptLimits(now time.Time) {
	held, ok := e.readLimits()
	if !ok {
		return
	}
	var version uint32
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		version, err = batch.LoadApplyVersion(r)
		return err
	}); err != nil {
		e.cfg.Logger.Warn("the partition's apply version did not read", "partition", e.cfg.Partition, "err", err)
		return
	}
	want := e.cfg.Limits
	steps := version >= batch.ApplyVersionPriority
	if !steps {
		want.PriorityStepMicros = held.PriorityStepMicros
	}
	if want.MaxMutationsPerBatch == 0 || want == held {
		return
	}
	proposed := want.Proto()
	if !steps {
		proposed.PriorityStepMicros = nil
	}
	e.cfg.Logger.Info("the partition's limits differ from this silo's; proposing this silo's",
		"partition", e.cfg.Partition, "differences", limitDifferences(held, want))
	e.propose(now, &pending{limits: true, req: &orreryv1.CommandRequest{Principal: LimitsPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("limits-%d", e.readTime(now)),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetLimits{SetLimits: &orreryv1.SetLimits{Limits: proposed}}}},
	}}})
}

// readLimits makes the limits the partition's state holds the engine's own (Applier.Limits).
func (e *Engine) readLimits() (input.Limits, bool) {
	var held input.Limits
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		held, err = batch.LoadLimits(r)
		return err
	}); err != nil {
		e.cfg.Logger.Warn("partition limits did not read", "partition", e.cfg.Partition, "err", err)
		return held, false
	}
	e.cfg.Applier.Limits = held
	return held, true
}

// limitsSet takes the reply of the engine's SetLimits command: the partition's limits are
// what it proposed (read back, since below batch.ApplyVersionPriority it proposed no step).
func (e *Engine) limitsSet(r *orreryv1.CommandReply) {
	if r.GetError() != nil {
		e.cfg.Logger.Warn("the partition did not take this silo's limits", "partition", e.cfg.Partition, "err", r.GetError().GetMessage())
		return
	}
	e.readLimits()
}

// limitDifferences lists the limits that differ, as "field: held → wanted".
func limitDifferences(held, want input.Limits) []string {
	h, w := held.Proto().ProtoReflect(), want.Proto().ProtoReflect()
	var out []string
	fields := h.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if !h.Get(f).Equal(w.Get(f)) {
			out = append(out, fmt.Sprintf("%s: %v → %v", f.Name(), h.Get(f), w.Get(f)))
		}
	}
	return out
}
