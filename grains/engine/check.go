package engine

import (
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// ConsistencyPrincipal is the principal of the engine's own CheckConsistency commands.
const ConsistencyPrincipal = input.SystemPrincipalPrefix + "consistency"

// check proposes one CheckConsistency command, every replica's state machine hashing its
// state as of its entry (the host compares the replicas'), unless one is still in flight; the
// next one follows CheckEvery after its reply.
func (e *Engine) check(now time.Time) {
	if e.stopped || e.cfg.CheckEvery <= 0 || e.checking {
		return
	}
	e.checking = true
	e.propose(now, &pending{check: true, req: &orreryv1.CommandRequest{Principal: ConsistencyPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("check-%d", e.readTime(now)),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_CheckConsistency{CheckConsistency: &orreryv1.CheckConsistency{}}}},
	}}})
}

// checked takes the reply of the engine's CheckConsistency command and arms the next one.
func (e *Engine) checked(now time.Time) {
	e.checking = false
	if !e.stopped {
		e.arm(CheckTimer, now.Add(e.cfg.CheckEvery))
	}
}
