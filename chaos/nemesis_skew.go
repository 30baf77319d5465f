package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orreryhq/orrery/cluster/clockoffset"
)

// maxClockSkew bounds the offset FaultSkew gives a silo's clock, either way.
const maxClockSkew = 10 * time.Minute

// skew SIGKILLs a silo (most often a partition's leader), starts it again with its wall clock
// offset (ClockOffsetEnv) by 30 s to maxClockSkew, ahead or behind, lets it serve 10–30 s, then
// SIGKILLs it and starts it again on the real clock.
//
// The offset is far beyond the silos' --max-clock-offset (clockoffset.DefaultMaxOffset, the
// default the harness leaves), and every other silo is up: the skewed silo judges itself
// clock-unfit against the majority within a second or so of rejoining, and until then it has
// not judged itself fit, so it takes no leadership (its replicas follow) and stamps no logged
// time; its /readyz answers 503 naming the clock offset. Logged time is stamped by the other
// silos' clocks, which may be off the real time by at most the bound, so the nemesis records
// only the bound (clockAhead) for the checkers and the drain. (In combined, where another silo
// is down, the skewed silo and the last fit one are a tie: neither is judged, one of them
// leads, and the skewed silo's whole offset is recorded.)
func (n *nemesis) skew(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	offset := between(n.rng, 30*time.Second, maxClockSkew).Round(time.Second)
	if n.rng.IntN(2) == 0 {
		offset = -offset
	}
	held := between(n.rng, 10*time.Second, 30*time.Second)
	return n.skewBy(ctx, f, i, leads, offset, held)
}

// skewBy is skew with its choices made: silo i (the leader of partition leads, or -1), its
// clock offset by offset for held.
func (n *nemesis) skewBy(ctx context.Context, f *Fault, i, leads int, offset, held time.Duration) error {
	f.Detail = fmt.Sprintf("SIGKILL %s and restart it with its clock %s for %v", n.describe(f, i, leads), signed(offset), held.Round(time.Millisecond))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	err := n.withSkew(ctx, i, offset, true, func() error {
		n.sleep(ctx, held)
		return nil
	})
	f.Undone = time.Now().UTC()
	return err
}

// withSkew SIGKILLs silo i, starts it again with its clock offset by offset, waits until it has
// rejoined, runs during, then SIGKILLs it and starts it again on the real clock, waiting until
// it has rejoined. unfit says that every other silo is up, so the skewed silo is found
// clock-unfit and stamps no logged time: only the bound is recorded as the clock ahead.
func (n *nemesis) withSkew(ctx context.Context, i int, offset time.Duration, unfit bool, during func() error) error {
	p := n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	ahead := offset
	if unfit {
		ahead = min(offset, clockoffset.DefaultMaxOffset)
	}
	if ahead > 0 {
		n.noteClockAhead(ahead, time.Now().Add(readyTimeout+n.timings.RecoveryTimeout))
	}
	if err := n.restartWith(i, fmt.Sprintf("%s=%s", ClockOffsetEnv, signed(offset))); err != nil {
		return err
	}
	var errs []error
	if err := n.awaitRejoined(ctx, i); err != nil {
		errs = append(errs, fmt.Errorf("silo %d on a clock %s: %w", i, signed(offset), err))
	}
	errs = append(errs, during())
	p = n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	if ahead > 0 {
		n.noteClockAhead(ahead, time.Now()) // stopped: from now on its logged times only age
	}
	if err := n.restart(i); err != nil {
		return errors.Join(append(errs, err)...)
	}
	return errors.Join(append(errs, n.awaitRejoined(ctx, i))...)
}

// signed renders an offset with its sign, as ClockOffsetEnv takes it: +7m0s, -1m30s.
func signed(offset time.Duration) string {
	if offset < 0 {
		return offset.String()
	}
	return "+" + offset.String()
}

// clockAhead is how far ahead of the real time the clock of a silo of the run ran at most
// (FaultSkew), and until when a partition's logged time may still be ahead of the real time
// because of it: the instant that silo stopped, plus its offset. Zero when no silo ran ahead.
type clockAhead struct {
	by    time.Duration
	until time.Time
}

// noteClockAhead records a silo whose clock runs by ahead and may stamp logged times until
// stopped.
func (n *nemesis) noteClockAhead(by time.Duration, stopped time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ahead.by = max(n.ahead.by, by)
	if until := stopped.Add(by); until.After(n.ahead.until) {
		n.ahead.until = until
	}
}

// clockAhead is what noteClockAhead recorded.
func (n *nemesis) clockAhead() clockAhead {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ahead
}
