package engine

import (
	"fmt"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/schedule"
)

// ZoneRulesPrincipal is the principal of the engine's own RefreshZoneRules commands.
const ZoneRulesPrincipal = input.SystemPrincipalPrefix + "zone-rules"

// refreshZones proposes a RefreshZoneRules of the zones whose rules the partition holds in an
// older release than this binary's (schedule.StaleZones, at most schedule.MaxRefreshZones at a
// time; the reply proposes the next ones). The entry carries this binary's rules of them, and
// every replica applies them alike: after an upgrade to newer tzdata, a leader on the new
// binary moves its partitions' zones onto it without waiting for a configure.
func (e *Engine) refreshZones(now time.Time) {
	var stale []string
	if err := e.state.View(func(r kv.Reader) error {
		var err error
		stale, err = schedule.StaleZones(r)
		return err
	}); err != nil {
		e.cfg.Logger.Warn("the partition's zone rules did not read", "partition", e.cfg.Partition, "err", err)
		return
	}
	if len(stale) == 0 {
		return
	}
	e.cfg.Logger.Info("the partition holds older zone rules than this silo's; proposing this silo's", "partition", e.cfg.Partition,
		"zones", stale)
	e.propose(now, &pending{zones: true, req: &orreryv1.CommandRequest{Principal: ZoneRulesPrincipal, Batch: &orreryv1.Batch{
		CommandId: fmt.Sprintf("zone-rules-%d", e.readTime(now)),
		Mutations: []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_RefreshZoneRules{RefreshZoneRules: &orreryv1.RefreshZoneRules{Zones: stale}}}},
	}}})
}

// zonesRefreshed takes the reply of the engine's RefreshZoneRules command and proposes the
// next one while zones remain stale.
func (e *Engine) zonesRefreshed(now time.Time, r *orreryv1.CommandReply) {
	if err := r.GetError(); err != nil {
		e.cfg.Logger.Warn("the partition did not take this silo's zone rules", "partition", e.cfg.Partition, "err", err.GetMessage())
		return
	}
	if res := r.GetReceipt(); len(res) == 0 {
		return
	}
	e.refreshZones(now)
}
