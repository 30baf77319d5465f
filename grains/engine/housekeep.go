package engine

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// housekeep proposes one Housekeep command like any other, so retention is replicated and
// deterministic like every other change, when something has expired: an idle partition writes
// nothing. When the command reports more, the next one runs right after it; otherwise after
// HousekeepEvery.
func (e *Engine) housekeep(now time.Time) {
	if e.stopped {
		return
	}
	if e.housekeeping {
		e.arm(HousekeepTimer, now.Add(e.cfg.HousekeepEvery))
		return
	}
	due := false
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		due, err = e.cfg.Applier.HousekeepingDue(r, e.readTime(now))
		return err
	}); err != nil || !due {
		e.arm(HousekeepTimer, now.Add(e.cfg.HousekeepEvery))
		return
	}
	e.housekeeping = true
	// Each housekeeping command applies before the next is made, so the applied index names
	// it uniquely.
	index, _ := e.state.Applied()
	e.propose(now, &pending{housekeep: true, req: &orreryv1.CommandRequest{Principal: HousekeepingPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("housekeep-%d", index),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Housekeep{Housekeep: &orreryv1.Housekeep{MaxRecords: HousekeepRecords}}}},
	}}})
}

// housekept takes the reply of the engine's Housekeep command and arms the next one: at once
// when it reported more, after HousekeepEvery otherwise (or after a failure).
func (e *Engine) housekept(now time.Time, r *orreryv1.CommandReply) {
	e.housekeeping = false
	if e.stopped {
		return
	}
	next := e.cfg.HousekeepEvery
	rc := &orreryv1.Receipt{}
	if r.GetError() == nil && proto.Unmarshal(r.GetReceipt(), rc) == nil && len(rc.GetResults()) == 1 && rc.GetResults()[0].GetHousekeep().GetMore() {
		next = 0
	}
	e.arm(HousekeepTimer, now.Add(next))
}
