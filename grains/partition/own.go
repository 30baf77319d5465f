package partition

import (
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

// OwnDuePrincipal is the principal of the due batches a partition makes itself.
const OwnDuePrincipal = input.SystemPrincipalPrefix + "partition-due"

// Bounds of one own due batch; its emits also share batch.OwnBatchOccurrences.
const (
	// ownDueRefs is the most refs in one own due batch (the default MaxMutationsPerBatch). A
	// batch the partition refuses as a whole (more than one transaction holds) halves the
	// next ones' bound, and each applied one doubles it back.
	ownDueRefs = 256
	// ownEmitMax is EmitOccurrences.max (the state machine's cap).
	ownEmitMax = 32
)

// dueTick wakes the grain at its due head's next instant.
type dueTick struct{}

// ownDue builds the partition's own due batch: the refs of its due index due at now and not on
// backoff, as EmitOccurrences and ExpireSaga with their CAS tokens, like a due coordinator's
// command (DESIGN §5) but proposed by the partition itself, with no inbox entry. It returns
// nil when nothing is due.
func (g *grain) ownDue(now int64) *pending {
	if g.ownRefs == 0 {
		g.ownRefs = ownDueRefs
	}
	refs := slices.DeleteFunc(g.dueRefs(now, min(g.ownRefs+len(g.ownFlying), MaxScanRefs)), func(ref *orreryv1.DueRef) bool {
		if _, flying := g.ownFlying[ownRefKey(ref)]; flying {
			return true // in a batch in flight
		}
		known := ref.GetKind() == orreryv1.DueKind_DUE_KIND_SCHEDULE || ref.GetKind() == orreryv1.DueKind_DUE_KIND_SAGA
		if !known { // written by a newer version: leave it to one that knows it
			g.ownSkips.Skip(ref, g.cfg.Clock.Now())
		}
		return !known
	})
	refs = refs[:min(len(refs), g.ownRefs)]
	if len(refs) == 0 {
		return nil
	}
	muts := due.Mutations(refs, ownEmitMax)
	g.ownSeq++
	req := &orreryv1.CommandRequest{Principal: OwnDuePrincipal, Batch: &orreryv1.Batch{
		CommandId: "due-" + strconv.FormatUint(g.term(), 10) + "-" + strconv.FormatUint(g.ownSeq, 10),
		Mutations: muts,
	}}
	return &pending{req: req, own: refs}
}

// dueRefs reads up to maxRefs refs due at now from the due head (loading it when it does not
// cover now), leaving out refs on backoff.
func (g *grain) dueRefs(now int64, maxRefs int) []*orreryv1.DueRef {
	budget := due.Budget{MaxRefs: maxRefs, FromMicros: g.dueFloor}
	res, err := g.scanHead(now, budget)
	if err != nil {
		g.log.Warn("partition could not read its due index", "err", err)
		return nil
	}
	if g.ownSkips.Len() == 0 {
		return res.Refs
	}
	return g.ownSkips.Filter(res.Refs, g.cfg.Clock.Now())
}

// scanHead scans the due head at now within budget, loading the head from the store when it
// does not cover now, and reading the store past it for a backlog beyond its bound. A scan
// from the due floor raises it.
func (g *grain) scanHead(now int64, budget due.Budget) (*due.Result, error) {
	res, covered, err := g.head.Scan(now, budget)
	if !covered && !g.head.Covers(now) {
		if err := g.state.View(func(r kv.Reader) error { return g.head.Load(r, g.dueFloor, now+dueHeadAhead) }); err != nil {
			g.head.Reset()
			g.log.Warn("partition could not load its due head", "err", err)
		}
		res, covered, err = g.head.Scan(now, budget)
	}
	if !covered { // a backlog beyond the head's bound: read the store
		err = g.state.View(func(r kv.Reader) error {
			var err error
			res, err = due.ScanDue(r, now, budget)
			return err
		})
	}
	if err == nil && budget.After == nil {
		g.raiseDueFloor(res)
	}
	return res, err
}

// ownApplied takes the outcome of an own due batch once it is applied: refs that failed for a
// lasting reason go on backoff (see duebackoff.Backoff), so the next groups leave them out until it
// ends; stale ones need nothing, since the index holds their records' new entries.
func (g *grain) ownApplied(p *pending, reply *orreryv1.CommandReply) {
	wall := g.cfg.Clock.Now()
	fail := func(ref *orreryv1.DueRef, err error) {
		switch code := orrery.CodeOf(err); code {
		case orrery.CodeTokenInvalidated, orrery.CodeRevisionConflict, orrery.CodeNotFound:
			return
		case orrery.CodeExpired, orrery.CodeValidation, orrery.CodeQuotaExceeded, orrery.CodeUnauthorized, orrery.CodeSuspended:
		default:
			g.log.Warn("partition could not emit a due ref", "kind", ref.GetKind(), "id", ref.GetId(), "token", ref.GetToken(), "err", err)
		}
		g.ownSkips.Skip(ref, wall)
	}
	if err := orrery.FromProto(reply.GetError()); err != nil {
		g.log.Warn("partition's own due batch was refused", "refs", len(p.own), "err", err)
		if len(p.own) > 1 { // most likely more than one transaction holds: fewer refs next time
			g.ownRefs = max(1, len(p.own)/2)
			return
		}
		fail(p.own[0], err)
		return
	}
	g.ownRefs = min(ownDueRefs, 2*g.ownRefs)
	for i, res := range p.ownReceipt.GetResults() {
		if i >= len(p.own) {
			break
		}
		if err := orrery.FromProto(res.GetError()); err != nil {
			fail(p.own[i], err)
		} else if g.ownSkips.Len() > 0 {
			g.ownSkips.Clear(p.own[i])
		}
	}
}

// armDueTimer sets the due timer at the due head's next instant, with own emission on and no
// own batch in flight (its apply proposes the next one, which takes what is due then).
func (g *grain) armDueTimer(ctx actor.Context) {
	if g.dueTimer != nil {
		g.dueTimer.Stop()
		g.dueTimer = nil
	}
	if !g.cfg.OwnEmission || g.state == nil || g.stopping || g.ownInflight > 0 {
		return
	}
	now := g.readTime()
	res, err := g.scanHead(now, due.Budget{MaxRefs: MaxScanRefs, FromMicros: g.dueFloor})
	if err != nil {
		g.log.Warn("partition could not read its due index", "err", err)
		return
	}
	next := res.NextDueAtMicros // 0: nothing later
	if res.More {
		next = max(next, now+1000) // due refs beyond the scan, all on backoff: look again soon
	}
	for _, ref := range res.Refs { // due now, so on backoff (emitDue took the others)
		at := now
		if retry, ok := g.ownSkips.RetryAt(ref); ok {
			at = max(at, retry.UnixMicro())
		}
		if next == 0 || at < next {
			next = at
		}
	}
	if next == 0 {
		return
	}
	wait := time.Duration(next-g.cfg.Clock.Now().UnixMicro()) * time.Microsecond
	self, root := ctx.Self(), ctx.ActorSystem().Root
	g.dueTimer = g.cfg.Clock.AfterFunc(max(wait, 0), func() { root.Send(self, &dueTick{}) })
}
