package rebalance

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// Every is how often a Rebalancer runs a round: a capped queue's shares follow its demand
// within about this delay (a round's reads and sets add theirs).
const Every = time.Second

// DiscoverEvery is how many rounds apart a Rebalancer looks for capped queues in every
// partition's queue list (a bounded count of each queue's messages): a queue capped since is
// balanced within about DiscoverEvery × Every, and from then on every round.
const DiscoverEvery = 10

// Config is what a Rebalancer works with.
type Config struct {
	// Client reads the queues' stats and sets their shares, as one of Orrery's own principals.
	Client *client.Client
	// Leads reports whether this silo should run rounds now: whether it leads partition 0, so
	// that one silo of the cluster rebalances at a time.
	Leads func() bool
	// Every is the time between rounds (0: Every).
	Every time.Duration
	// RoundTimeout bounds one round's calls (0: 5 s).
	RoundTimeout time.Duration
	// Logger gets a DEBUG line for each queue a round could not balance (nil: slog.Default).
	Logger *slog.Logger
}

// Rebalancer runs rounds of share moves for every capped queue while its silo leads
// partition 0 (see the package doc).
type Rebalancer struct {
	cfg    Config
	owed   map[queueName]owed
	capped []queueName // as the last discovery found them, sorted
	rounds int
}

type queueName struct{ namespace, queue string }

// owed are units a round freed and could not place, and the shares as that round left them
// (set_at_unix_micros per partition): a later round places them only while the shares are
// still those, that is while nobody else changed one.
type owed struct {
	leased, milli uint64
	known         []int64
}

// New returns a Rebalancer of cfg.
func New(cfg Config) *Rebalancer {
	if cfg.Every <= 0 {
		cfg.Every = Every
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Rebalancer{cfg: cfg, owed: map[queueName]owed{}}
}

// Run runs a round every cfg.Every while cfg.Leads, until ctx ends.
func (r *Rebalancer) Run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !r.cfg.Leads() {
			clear(r.owed) // another silo's rebalancer may move units now
			r.rounds = 0  // and it may cap queues meanwhile: discover at once when leading again
			continue
		}
		round, cancel := context.WithTimeout(ctx, r.cfg.RoundTimeout)
		r.Round(round)
		cancel()
	}
}

// Round rebalances every capped queue once (balance), having looked for them first every
// DiscoverEvery rounds (discover).
func (r *Rebalancer) Round(ctx context.Context) {
	if r.rounds%DiscoverEvery == 0 {
		r.capped = r.discover(ctx)
	}
	r.rounds++
	for _, q := range r.capped {
		if err := r.balance(ctx, q); err != nil {
			r.cfg.Logger.Debug("orrery rebalancer: queue not balanced", "namespace", q.namespace, "queue", q.queue, "err", err)
		}
	}
}

// discover finds the capped queues in each partition's queue list (a queue holding messages
// and a share there), sorted.
func (r *Rebalancer) discover(ctx context.Context) []queueName {
	c := r.cfg.Client
	seen := map[queueName]bool{}
	var capped []queueName
	for p := range c.Partitions() {
		queues, _, err := c.ListQueueStats(ctx, p, 0)
		if err != nil {
			continue // an unreachable partition: its queues are found through the others, or next round
		}
		for _, s := range queues {
			q := queueName{s.GetNamespace(), s.GetQueue()}
			if s.GetShare() != nil && !seen[q] {
				seen[q] = true
				capped = append(capped, q)
			}
		}
	}
	slices.SortFunc(capped, func(a, b queueName) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.queue, b.queue))
	})
	return capped
}

// balance runs one round of moves for queue q: read every partition's share and demand, lower
// the shares above their targets, then raise the ones below with what the lowering freed (and
// what is owed).
func (r *Rebalancer) balance(ctx context.Context, q queueName) error {
	c := r.cfg.Client
	p := c.Partitions()
	stats := make([]*orreryv1.QueueStats, p)
	var policy *orreryv1.QueueLimits
	for n := range p {
		s, err := c.QueueStatsOn(ctx, n, q.namespace, q.queue)
		if err != nil {
			continue // unreachable: it keeps its share
		}
		if s.GetShare() == nil {
			return nil // a partition without a share: limits being set or removed, not ours to move
		}
		if policy != nil && !proto.Equal(policy, s.GetShare().GetPolicy()) {
			return nil // policies disagree: limits being changed
		}
		policy, stats[n] = s.GetShare().GetPolicy(), s
	}
	if policy == nil {
		return nil
	}
	debt := r.owed[q]
	for n, s := range stats {
		if debt.known == nil || s == nil || debt.known[n] != s.GetShare().GetSetAtUnixMicros() {
			debt = owed{} // someone else changed a share since: what was owed is theirs to account for
			break
		}
	}
	leased, milli := make([]Partition, p), make([]Partition, p)
	for n, s := range stats {
		demand := s.GetVisible() + s.GetLeased()
		leased[n] = Partition{Reachable: s != nil, Units: uint64(s.GetShare().GetShareLeased()), Demand: demand}
		milli[n] = Partition{Reachable: s != nil, Units: s.GetShare().GetShareMilliPerSecond(), Demand: demand}
	}
	setAt := make([]int64, p)
	for n, s := range stats {
		setAt[n] = s.GetShare().GetSetAtUnixMicros()
	}
	// set sets partition n's share to (k, m) and returns the share in force after it: a share is
	// never set below the leases it counts, so a lowering may free fewer units than asked.
	set := func(n int, k, m uint64) (uint64, uint64, bool) {
		res, err := c.SetQueueShare(ctx, n, &orreryv1.SetQueueShare{Namespace: q.namespace, Queue: q.queue, Policy: policy,
			ShareLeased: uint32(k), ShareMilliPerSecond: m, Compare: true, ExpectedSetAtUnixMicros: setAt[n]})
		if err != nil {
			return 0, 0, false
		}
		setAt[n] = res.GetShare().GetSetAtUnixMicros()
		return uint64(res.GetShare().GetShareLeased()), res.GetShare().GetShareMilliPerSecond(), true
	}
	// What the shares hold above the limits (after the limits were lowered below the leases
	// held) is given up, not placed again.
	leasedLimit, milliLimit := uint64(policy.GetMaxLeased()), 1000*uint64(policy.GetLeasesPerSecond())
	excessLeased, excessMilli := sum(leased)-min(sum(leased), leasedLimit), sum(milli)-min(sum(milli), milliLimit)
	// Lower first: every decrease commits before any increase is sent.
	leasedTargets := Targets(min(sum(leased)+debt.leased, leasedLimit), leased)
	milliTargets := Targets(min(sum(milli)+debt.milli, milliLimit), milli)
	freedLeased, freedMilli := debt.leased, debt.milli
	lowered := map[int]bool{}
	for _, s := range append(Decreases(leased, leasedTargets), Decreases(milli, milliTargets)...) {
		lowered[s.Partition] = true
	}
	for n := range p {
		if !lowered[n] {
			continue
		}
		if k, m, ok := set(n, min(leased[n].Units, leasedTargets[n]), min(milli[n].Units, milliTargets[n])); ok {
			freedLeased += leased[n].Units - min(k, leased[n].Units)
			freedMilli += milli[n].Units - min(m, milli[n].Units)
			leased[n].Units, milli[n].Units = k, m
		}
	}
	cover := func(freed *uint64, excess uint64) {
		*freed -= min(*freed, excess)
	}
	cover(&freedLeased, excessLeased)
	cover(&freedMilli, excessMilli)
	// Then raise, by at most what was freed.
	raises := map[int][2]uint64{}
	for _, s := range Increases(leased, leasedTargets, freedLeased) {
		raises[s.Partition] = [2]uint64{s.To - s.From, raises[s.Partition][1]}
	}
	for _, s := range Increases(milli, milliTargets, freedMilli) {
		raises[s.Partition] = [2]uint64{raises[s.Partition][0], s.To - s.From}
	}
	for n := range p {
		up, ok := raises[n]
		if !ok {
			continue
		}
		if k, m, ok := set(n, leased[n].Units+up[0], milli[n].Units+up[1]); ok {
			freedLeased -= min(freedLeased, k-min(k, leased[n].Units))
			freedMilli -= min(freedMilli, m-min(m, milli[n].Units))
		} // not placed: still owed
	}
	if freedLeased == 0 && freedMilli == 0 {
		delete(r.owed, q)
		return nil
	}
	r.owed[q] = owed{leased: freedLeased, milli: freedMilli, known: setAt}
	return nil
}

func sum(parts []Partition) uint64 {
	var total uint64
	for _, p := range parts {
		if p.Reachable {
			total += p.Units
		}
	}
	return total
}
