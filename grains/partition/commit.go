package partition

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
)

// Journal retention: the newest JournalRetention records are kept; each commit trims at most
// journalTrimPerCommit older ones, so trimming stays bounded and keeps up.
const (
	JournalRetention     = 10_000
	journalTrimPerCommit = 64
)

// maxUnsyncedGroups bounds the groups applied and waiting for a sync: beyond it, the next
// group waits for the sync in flight.
const maxUnsyncedGroups = 64

// startCommit takes the next group off the pending queue and applies it on the apply runner; the
// actor keeps admitting commands meanwhile, and they form the next group. A group does not
// wait for the groups before it to be durable: it applies over them (the store's writer reads
// what was applied), and one sync then makes every group applied before it durable (see
// startSync). Only replies wait for the sync.
func (g *grain) startCommit(ctx actor.Context) {
	if g.applying || g.store == nil || g.stopping || len(g.unsynced) >= maxUnsyncedGroups {
		return
	}
	var own *pending
	if g.cfg.OwnEmission {
		own = g.ownDue(g.readTime())
	}
	if len(g.pending) == 0 && own == nil {
		g.armDueTimer(ctx)
		return
	}
	if g.dueTimer != nil { // the group's end starts the next one, which takes what is due then
		g.dueTimer.Stop()
		g.dueTimer = nil
	}
	if g.applyTimer != nil {
		return // a paced group start is waiting
	}
	if gap := g.cfg.BusyApplyGap; gap > 0 && g.cfg.SyncPacer.Busy() && !g.stopping {
		if wait := time.Until(g.lastApplyStart.Add(gap)); wait > 0 {
			g.ownSeq-- // own is made again when the timer fires
			self, root := ctx.Self(), ctx.ActorSystem().Root
			g.applyTimer = time.AfterFunc(wait, func() { root.Send(self, &applyDue{}) })
			return
		}
	}
	g.lastApplyStart = time.Now()
	n, bytes := 0, 0
	for n < len(g.pending) && n < g.cfg.MaxGroupCommands && (n == 0 || bytes+g.pending[n].bytes <= g.cfg.MaxGroupBytes) {
		bytes += g.pending[n].bytes
		n++
	}
	group := g.pending[:n:n]
	if own != nil {
		group = append([]*pending{own}, group...)
	}
	g.pending = append([]*pending(nil), g.pending[n:]...)
	g.applying = true
	done := make(chan struct{})
	g.applyDone = done
	self, root, store, gc := ctx.Self(), ctx.ActorSystem().Root, g.store, g.valueLogGCDue()
	g.applyRunner.run(func() {
		defer close(done)
		recorder := &dueRecorder{}
		replies, err := g.commitGroup(store, group, recorder)
		if gc && err == nil {
			if gcErr := store.RunValueLogGC(0.5); gcErr != nil {
				g.log.Warn("value-log GC failed", "err", gcErr)
			}
		}
		root.Send(self, &groupApplied{group: group, replies: replies, err: err,
			minDueWritten: recorder.minDue, dueWrites: recorder.writes, floors: recorder.promoted})
	})
}

// startSync syncs the store on the sync runner, unless a sync is running: every group applied so
// far becomes durable at once, and groups applied meanwhile wait for the next sync. While the
// SyncPacer says the process is busy, a sync starts no sooner than its gap after the previous
// one began (a timer sends syncDue then).
func (g *grain) startSync(ctx actor.Context) {
	if g.syncing || g.syncTimer != nil || g.store == nil || len(g.unsynced) == 0 {
		return
	}
	if gap := g.cfg.SyncPacer.Gap(); gap > 0 && !g.stopping {
		if wait := time.Until(g.lastSyncStart.Add(gap)); wait > 0 {
			self, root := ctx.Self(), ctx.ActorSystem().Root
			g.syncTimer = time.AfterFunc(wait, func() { root.Send(self, &syncDue{}) })
			return
		}
	}
	g.lastSyncStart = time.Now()
	g.syncing = true
	done := make(chan struct{})
	g.syncDone = done
	self, root, store, covered := ctx.Self(), ctx.ActorSystem().Root, g.store, len(g.unsynced)
	g.syncRunner.run(func() {
		defer close(done)
		root.Send(self, &groupsSynced{covered: covered, err: g.cfg.syncStore(store)})
	})
}

// commitGroup applies a group, splitting it when it exceeds the store's transaction limit. It
// returns one reply per command, or the error that ends the activation.
func (g *grain) commitGroup(store *persistence.Store, group []*pending, recorder *dueRecorder) ([]*orreryv1.CommandReply, error) {
	replies, err := g.commitOnce(store, group, recorder)
	if !errors.Is(err, persistence.ErrBatchTooBig) {
		return replies, err
	}
	if len(group) == 1 {
		return []*orreryv1.CommandReply{errorReply(orrery.FieldErrorf(orrery.CodeValidation, "batch",
			"command %s writes more than the partition's transaction limit of %d bytes; split it", describe(group[0]), store.MaxBatchBytes()))}, nil
	}
	half := len(group) / 2
	first, err := g.commitGroup(store, group[:half], recorder)
	if err != nil {
		return nil, err
	}
	second, err := g.commitGroup(store, group[half:], recorder)
	if err != nil {
		return nil, err
	}
	return append(first, second...), nil
}

// commitOnce applies every command of the group in one transaction at one logged time,
// journals the applied ones, and hands the transaction to the store (not yet durable).
func (g *grain) commitOnce(store *persistence.Store, group []*pending, recorder *dueRecorder) ([]*orreryv1.CommandReply, error) {
	loggedNow := persistence.NextLoggedTime(store.LoggedTime(), g.cfg.Now().UTC().UnixMicro())
	replies := make([]*orreryv1.CommandReply, len(group))
	var cached *kv.ReadCache
	var recorded *dueRecorder
	var floored *kv.FloorView
	err := store.Apply(func(txn *persistence.Txn) error {
		var journal []*orreryv1.JournalEntry
		floored = g.floors.View(txn)
		recorded = &dueRecorder{View: floored}
		cached = kv.NewReadCache(recorded, g.warm) // every write of the group goes through it
		// ApplyBatch writes nothing before it refuses an envelope (Validation,
		// IdempotencyConflict), so commands apply straight onto the transaction; any other
		// error fails the whole group.
		apply := func(p *pending) (*orreryv1.CommandReply, error) {
			if p.own != nil {
				receipt, err := g.applier.ApplyOwn(cached, p.req.GetPrincipal(), p.req.GetBatch(), loggedNow)
				if err != nil {
					if platform(err) {
						return nil, err
					}
					return errorReply(err), nil
				}
				p.ownReceipt = receipt
				journal = append(journal, &orreryv1.JournalEntry{Principal: p.req.GetPrincipal(), Batch: p.req.GetBatch(), Own: true})
				return &orreryv1.CommandReply{}, nil
			}
			out, err := g.applier.ApplyBatch(cached, p.req.GetPrincipal(), p.req.GetBatch(), loggedNow)
			if err != nil {
				if platform(err) {
					return nil, err
				}
				return errorReply(err), nil
			}
			if !out.Replayed {
				journal = append(journal, &orreryv1.JournalEntry{Principal: p.req.GetPrincipal(), Batch: p.req.GetBatch()})
			}
			return &orreryv1.CommandReply{Receipt: out.ReceiptBytes}, nil
		}
		for i, p := range group {
			reply, err := apply(p)
			if err != nil {
				return err
			}
			replies[i] = reply
		}
		if len(journal) == 0 {
			return nil // replays and refused envelopes only: nothing to write
		}
		index := store.AppliedIndex() + 1
		if err := txn.SetLoggedTime(loggedNow); err != nil {
			return err
		}
		if err := txn.SetAppliedIndex(index); err != nil {
			return err
		}
		if err := txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: index, LoggedTimeUnixMicros: loggedNow, Entries: journal}); err != nil {
			return err
		}
		if index > JournalRetention {
			if _, err := txn.TrimJournal(index-JournalRetention, journalTrimPerCommit); err != nil {
				return err
			}
		}
		g.cfg.Failpoints.Hit(FailpointBatchApplied)
		recorder.note(recorded.minDue)
		return nil
	})
	if err != nil {
		return nil, err
	}
	recorder.writes = append(recorder.writes, recorded.writes...)
	cached.Promote() // applied: the next groups read what this one read and wrote
	recorder.promoted = append(recorder.promoted, floored.Promote())
	return replies, nil
}

// platform reports whether an apply error is a platform failure (it ends the group) rather
// than a refused command envelope (it gets an error reply).
func platform(err error) bool {
	switch orrery.CodeOf(err) {
	case orrery.CodeValidation, orrery.CodeIdempotencyConflict:
		return false
	}
	return true
}

// finishApply takes an applied group: the due head, floor and coordinator learn its due-index
// writes, parked receives whose queue it made visible are answered visible at once, it waits
// for a sync (its replies go out only then), and the next group starts.
func (g *grain) finishApply(ctx actor.Context, done *groupApplied) {
	g.applying = false
	g.applyDone = nil
	if done.err != nil {
		for _, p := range done.group {
			g.reply(ctx, p, &orreryv1.CommandReply{Error: orrery.Wrap(orrery.CodeUnavailable, done.err, "partition %d could not commit", g.partition).Proto()})
		}
		if errors.Is(done.err, persistence.ErrCommitFailed) || orrery.CodeOf(done.err) == orrery.CodeInternal {
			g.fail(ctx, done.err) // logs, and stops the activation
			return
		}
		// Unavailable before writing (free-disk floor, closed store): the commands were not
		// applied; callers retry with the same command ids.
		g.log.Warn("partition refused a commit before writing", "err", done.err)
		g.startCommit(ctx)
		return
	}
	for _, w := range done.dueWrites {
		if w.value == nil {
			g.head.Delete(w.key)
		} else {
			g.head.Set(w.key, w.value)
		}
	}
	for _, p := range done.floors {
		g.readFloors.Adopt(p)
	}
	for i, p := range done.group {
		if p.own != nil && i < len(done.replies) {
			g.ownApplied(p, done.replies[i])
		}
	}
	g.unsynced = append(g.unsynced, done)
	if g.stopping || g.store == nil {
		return
	}
	g.startSync(ctx)
	// The coordinator may learn of new due entries before they are durable: it acts on them
	// only through commands applied after this group, which a crash would take back with it.
	g.lowerDueFloor(done.minDueWritten)
	g.noticeDueWritten(done.minDueWritten)
	g.wakeWaiters(ctx)
	g.startCommit(ctx)
}

// finishSync sends the replies of the groups a sync made durable (only now), then syncs the
// groups applied since, if any, and starts the next group if the unsynced bound held it back.
func (g *grain) finishSync(ctx actor.Context, done *groupsSynced) {
	g.syncing = false
	g.syncDone = nil
	if done.err != nil {
		g.fail(ctx, done.err) // logs, answers every unsynced group, and stops the activation
		return
	}
	g.cfg.Failpoints.Hit(FailpointBatchCommitted)
	synced := g.unsynced[:done.covered:done.covered]
	g.unsynced = append([]*groupApplied(nil), g.unsynced[done.covered:]...)
	g.replySynced(ctx, synced)
	g.cfg.Failpoints.Hit(FailpointReceiptSent)
	if g.stopping || g.store == nil {
		return
	}
	g.startSync(ctx)
	g.startCommit(ctx)
}

// replySynced sends the replies of durable groups.
func (g *grain) replySynced(ctx actor.Context, groups []*groupApplied) {
	for _, done := range groups {
		for i, p := range done.group {
			g.reply(ctx, p, done.replies[i])
		}
	}
}

// dueRecorder passes writes through to the transaction and remembers the earliest due-index
// entry written, so the grain's due floor stays exact (see grain.dueFloor), and every
// due-index write, for the grain's due head once the transaction commits.
type dueRecorder struct {
	kv.View
	minDue int64
	writes []dueWrite
	// promoted are the visibility floors each committed transaction promoted, for the
	// actor's replica (see grain.readFloors).
	promoted []kv.Promoted
}

// dueWrite is a due-index write: value nil for a delete.
type dueWrite struct{ key, value []byte }

// Set implements kv.View.
func (d *dueRecorder) Set(key, value []byte) error {
	if at, ok := due.DueAtOfKey(key); ok {
		d.note(at)
		d.writes = append(d.writes, dueWrite{key: key, value: value})
	}
	return d.View.Set(key, value)
}

// Delete implements kv.View.
func (d *dueRecorder) Delete(key []byte) error {
	if _, ok := due.DueAtOfKey(key); ok {
		d.writes = append(d.writes, dueWrite{key: key})
	}
	return d.View.Delete(key)
}

func (d *dueRecorder) note(at int64) {
	if at > 0 && (d.minDue == 0 || at < d.minDue) {
		d.minDue = at
	}
}
