package partition

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of SyncPacerConfig.
const (
	// DefaultBusySyncGap is how long a partition's sync waits after its previous sync began
	// while the process is busy.
	DefaultBusySyncGap = 20 * time.Millisecond
	// DefaultBusyApplyGap is how long a partition's group waits after its previous group began
	// while the process is busy (Config.BusyApplyGap).
	DefaultBusyApplyGap = 6 * time.Millisecond
	// DefaultBusyAbove and DefaultIdleBelow are the fractions of the machine's cores the
	// process must use for the pacer to turn busy, and then stay under to turn idle again.
	DefaultBusyAbove = 0.8
	DefaultIdleBelow = 0.6
	// DefaultPacerInterval is how often the pacer reads the process's CPU time.
	DefaultPacerInterval = 100 * time.Millisecond
)

// SyncPacerConfig configures a SyncPacer. Zero fields take their defaults.
type SyncPacerConfig struct {
	// BusyGap is the least time between the starts of one partition's syncs while the process
	// is busy (default DefaultBusySyncGap). Negative: never wait.
	BusyGap time.Duration
	// BusyAbove and IdleBelow bound the hysteresis, as fractions of the cores (defaults
	// DefaultBusyAbove and DefaultIdleBelow).
	BusyAbove, IdleBelow float64
	// Interval is how often CPU use is sampled (default DefaultPacerInterval).
	Interval time.Duration
}

func (c SyncPacerConfig) withDefaults() SyncPacerConfig {
	if c.BusyGap == 0 {
		c.BusyGap = DefaultBusySyncGap
	}
	if c.BusyAbove <= 0 {
		c.BusyAbove = DefaultBusyAbove
	}
	if c.IdleBelow <= 0 || c.IdleBelow > c.BusyAbove {
		c.IdleBelow = min(DefaultIdleBelow, c.BusyAbove)
	}
	if c.Interval <= 0 {
		c.Interval = DefaultPacerInterval
	}
	return c
}

// SyncPacer spaces the syncs of a silo's partitions when the process runs out of CPU.
//
// A sync of a partition's write-ahead log costs about the same CPU whatever it covers (the
// file system's journal commit, the device's flush, write-protecting the mapped pages again),
// and with a sync per group, syncs and the small groups they cause took most of the CPU of a
// silo with 10,000 occurrences a second on 2 cores. While the process uses more than BusyAbove
// of the machine's cores, a partition's sync waits until BusyGap after its previous sync
// began; groups go on applying meanwhile (logged times are not held back), and one sync then
// covers them all, while replies wait the longer. Below IdleBelow again, syncs start at once.
//
// One SyncPacer serves every partition of a process (Config.SyncPacer); nil never waits.
type SyncPacer struct {
	cfg  SyncPacerConfig
	gap  atomic.Int64 // the current gap, nanoseconds
	once sync.Once
}

// NewSyncPacer returns an idle pacer; Run samples the process's CPU use.
func NewSyncPacer(cfg SyncPacerConfig) *SyncPacer {
	return &SyncPacer{cfg: cfg.withDefaults()}
}

// Gap is how long after the start of a partition's previous sync its next may start.
func (p *SyncPacer) Gap() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.gap.Load())
}

// Busy reports whether the pacer is spacing syncs.
func (p *SyncPacer) Busy() bool { return p.Gap() > 0 }

// Run samples the process's CPU use every Interval until ctx ends. Only the first call runs.
func (p *SyncPacer) Run(ctx context.Context) {
	p.once.Do(func() {
		ticker := time.NewTicker(p.cfg.Interval)
		defer ticker.Stop()
		cores := float64(runtime.NumCPU())
		lastCPU, lastAt := processCPU(), time.Now()
		for {
			select {
			case <-ctx.Done():
				p.gap.Store(0)
				return
			case now := <-ticker.C:
				cpu := processCPU()
				p.observe((cpu - lastCPU).Seconds() / (now.Sub(lastAt).Seconds() * cores))
				lastCPU, lastAt = cpu, now
			}
		}
	})
}

// observe takes one sample of CPU use, as a fraction of the cores.
func (p *SyncPacer) observe(use float64) {
	switch busy := p.Busy(); {
	case !busy && use > p.cfg.BusyAbove && p.cfg.BusyGap > 0:
		p.gap.Store(int64(p.cfg.BusyGap))
	case busy && use < p.cfg.IdleBelow:
		p.gap.Store(0)
	}
}
