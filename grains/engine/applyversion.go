package engine

import (
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// ApplyVersionPrincipal is the principal of the engine's own SetApplyVersion commands.
const ApplyVersionPrincipal = input.SystemPrincipalPrefix + "apply-version"

// stepApplyVersion raises the partition's apply version to the newest one every voter of its
// group knows (Config.VotersApplyVersion) and this binary knows, when that is above the one
// the partition holds. It runs when the engine opens and at every housekeeping tick, so a
// rolling upgrade steps its partitions once its last silo runs the new release.
func (e *Engine) stepApplyVersion(now time.Time) {
	if e.cfg.VotersApplyVersion == nil || e.steppingVersion {
		return
	}
	voters, ok := e.cfg.VotersApplyVersion()
	if !ok {
		return
	}
	target := min(voters, e.cfg.Applier.KnownApplyVersionOrDefault())
	var held uint32
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		held, err = batch.LoadApplyVersion(r)
		return err
	}); err != nil {
		e.cfg.Logger.Warn("the partition's apply version did not read", "partition", e.cfg.Partition, "err", err)
		return
	}
	e.cfg.Applier.ApplyVersion, e.applyVersion = held, held
	if target <= held {
		return
	}
	e.cfg.Logger.Info("every voter of the partition knows a newer apply version; raising it", "partition", e.cfg.Partition,
		"from", held, "to", target)
	e.steppingVersion = true
	e.propose(now, &pending{version: true, req: &orreryv1.CommandRequest{Principal: ApplyVersionPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("apply-version-%d", target),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_SetApplyVersion{SetApplyVersion: &orreryv1.SetApplyVersion{Version: target}}}},
	}}})
}

// applyVersionSet takes the reply of the engine's SetApplyVersion command, and proposes the
// limits a new version takes (adoptLimits).
func (e *Engine) applyVersionSet(now time.Time, r *orreryv1.CommandReply) {
	e.steppingVersion = false
	if err := r.GetError(); err != nil {
		e.cfg.Logger.Warn("the partition did not raise its apply version", "partition", e.cfg.Partition, "err", err.GetMessage())
		return
	}
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		e.cfg.Applier.ApplyVersion, err = batch.LoadApplyVersion(r)
		e.applyVersion = e.cfg.Applier.ApplyVersion
		return err
	}); err != nil {
		e.cfg.Logger.Warn("the partition's apply version did not read", "partition", e.cfg.Partition, "err", err)
		return
	}
	e.adoptLimits(now)
}

// readApplyVersion reads the partition's apply version into e.applyVersion: the one its state
// holds, or Config.Applier's when that is higher (a twin applying under a version its state
// does not record; a silo's is 0). It is unchanged when the read fails.
func (e *Engine) readApplyVersion() {
	if err := e.state.View(func(r kv.Reader) error {
		held, err := batch.LoadApplyVersion(r)
		if err == nil {
			e.applyVersion = max(held, e.cfg.Applier.ApplyVersion)
		}
		return err
	}); err != nil {
		e.cfg.Logger.Warn("the partition's apply version did not read", "partition", e.cfg.Partition, "err", err)
	}
}
