package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// HousekeepingPrincipal is the principal of the grain's own housekeeping commands.
const HousekeepingPrincipal = input.SystemPrincipalPrefix + "housekeeping"

func (g *grain) scheduleHousekeeping(ctx actor.Context, after time.Duration) {
	if g.housekeepTimer != nil {
		g.housekeepTimer.Stop()
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.housekeepTimer = g.cfg.Clock.AfterFunc(after, func() { root.Send(self, &housekeepTick{}) })
}

// housekeep proposes one Housekeep command like any other, so retention is replicated and
// deterministic like every other change. When it reports more, the next one
// runs right after it; otherwise after HousekeepEvery.
func (g *grain) housekeep(ctx actor.Context) {
	if g.state == nil || g.stopping {
		return
	}
	if g.housekeeping {
		g.scheduleHousekeeping(ctx, g.cfg.HousekeepEvery)
		return
	}
	// An idle partition writes nothing: run only when something has expired.
	due := false
	if err := g.state.View(func(r kv.Reader) error {
		var err error
		due, err = g.applier.HousekeepingDue(r, g.readTime())
		return err
	}); err != nil || !due {
		g.scheduleHousekeeping(ctx, g.cfg.HousekeepEvery)
		return
	}
	g.housekeeping = true
	// Each housekeeping command applies before the next is made, so the applied index names
	// it uniquely.
	req := &orreryv1.CommandRequest{Principal: HousekeepingPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("housekeep-%d", g.state.Applied().Index),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Housekeep{Housekeep: &orreryv1.Housekeep{MaxRecords: HousekeepRecords}}}},
	}}
	p := &pending{req: req, onReply: func(r *orreryv1.CommandReply) {
		g.housekeeping = false
		next := g.cfg.HousekeepEvery
		rc := &orreryv1.Receipt{}
		if r.GetError() == nil && proto.Unmarshal(r.GetReceipt(), rc) == nil && len(rc.GetResults()) == 1 {
			if res := rc.GetResults()[0].GetHousekeep(); res.GetMore() {
				next = 0
			}
		}
		if !g.stopping {
			g.scheduleHousekeeping(ctx, next)
		}
	}}
	g.propose(ctx, p)
}
