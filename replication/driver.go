package replication

import (
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/persistence"
)

// Applier is the state machine side of a Driver. Apply runs each group's committed entries of
// a round, in log order, after they were persisted and the round's messages sent; an error is
// fatal to the driver. Settle then receives the round's Outcomes (answer the committed
// proposals once applied, fail the lost ones with Unavailable). Both run on the driver's
// goroutine and must not call back into the Driver.
type Applier interface {
	Apply(c Committed) error
	Settle(outcomes []Outcome)
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	Groups    *Groups
	Log       persistence.RaftLog
	Transport Transport
	Applier   Applier
	// Clock ticks the engine and reads the now Propose stamps with. Default clock.Real().
	Clock clock.Clock
	// TickInterval is the time one Raft tick stands for. Default 100 ms.
	TickInterval time.Duration
}

// Driver performs an engine's rounds: it ticks the engine every TickInterval of its clock,
// and whenever the engine has work it persists the round (one RaftLog.Persist), sends its
// messages, applies its committed entries, settles its outcomes and advances. Step, Receive,
// Propose and Status may be called from any goroutine. Tick and RunRound are what its
// goroutine does; tests that step replicas themselves call them instead of Start.
type Driver struct {
	cfg     DriverConfig
	mu      sync.Mutex // guards the engine
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	err     error // the fatal error that stopped the loop; read after done is closed
	tick    clock.Timer
	started bool
}

// NewDriver returns a driver that is not running yet.
func NewDriver(cfg DriverConfig) *Driver {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	return &Driver{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Start runs the loop on a goroutine of its own until Stop or a fatal error. Call it once.
func (d *Driver) Start() {
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
	d.armTick()
	go d.run()
}

// Stop ends the loop (if Start ran) and returns the fatal error that ended it first, if any.
func (d *Driver) Stop() error {
	d.mu.Lock()
	started := d.started
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	if d.tick != nil {
		d.tick.Stop()
	}
	d.mu.Unlock()
	if !started {
		return nil
	}
	<-d.done
	return d.err
}

// Done is closed once the loop has ended; Stop returns why.
func (d *Driver) Done() <-chan struct{} { return d.done }

func (d *Driver) armTick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.stop:
		return
	default:
	}
	d.tick = d.cfg.Clock.AfterFunc(d.cfg.TickInterval, func() {
		d.Tick()
		d.armTick()
	})
}

func (d *Driver) run() {
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		case <-d.wake:
		}
		for {
			did, err := d.RunRound()
			if err != nil {
				d.err = err
				return
			}
			if !did {
				break
			}
		}
	}
}

// signal wakes the loop.
func (d *Driver) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Tick advances every group by one Raft tick.
func (d *Driver) Tick() {
	d.mu.Lock()
	d.cfg.Groups.Tick()
	d.mu.Unlock()
	d.signal()
}

// Step hands one group a message from another replica; it reports the engine's refusal.
func (d *Driver) Step(group int, m *raftpb.Message) error {
	d.mu.Lock()
	err := d.cfg.Groups.Step(group, m)
	d.mu.Unlock()
	d.signal()
	return err
}

// Receive steps a batch a Transport delivered, ignoring the messages the engine refuses
// (for a group not hosted here, from a replica outside the group): Raft re-sends what matters.
func (d *Driver) Receive(msgs []Message) {
	d.mu.Lock()
	for _, m := range msgs {
		_ = d.cfg.Groups.Step(m.Group, m.Raft)
	}
	d.mu.Unlock()
	d.signal()
}

// Propose proposes a command to group, stamped from the driver's clock (Groups.Propose).
func (d *Driver) Propose(group int, principal string, command []byte) (Proposal, error) {
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	p, err := d.cfg.Groups.Propose(group, principal, command, now)
	d.mu.Unlock()
	d.signal()
	return p, err
}

// Status returns group's status (Groups.Status).
func (d *Driver) Status(group int) (Status, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Groups.Status(group)
}

// RunRound performs one round if some group has work, in the etcd raft order: persist, send,
// apply and settle, advance. It reports whether there was a round; an error is fatal (never
// continue after a failed Persist: what reached the disk is unknown).
func (d *Driver) RunRound() (bool, error) {
	d.mu.Lock()
	round, err := d.cfg.Groups.Ready()
	d.mu.Unlock()
	if err != nil || round == nil {
		return false, err
	}
	if len(round.Writes) > 0 {
		if err := d.cfg.Log.Persist(round.Writes); err != nil {
			return false, fmt.Errorf("persist raft round: %w", err)
		}
	}
	for _, out := range round.Messages {
		d.cfg.Transport.Send(out.To, out.Messages)
	}
	for _, c := range round.Committed {
		if err := d.cfg.Applier.Apply(c); err != nil {
			return false, fmt.Errorf("apply raft group %d: %w", c.Group, err)
		}
	}
	if len(round.Outcomes) > 0 {
		d.cfg.Applier.Settle(round.Outcomes)
	}
	d.mu.Lock()
	err = d.cfg.Groups.Advance(round)
	d.mu.Unlock()
	return true, err
}

// Campaign makes group campaign at once (Groups.Campaign).
func (d *Driver) Campaign(group int) error {
	d.mu.Lock()
	err := d.cfg.Groups.Campaign(group)
	d.mu.Unlock()
	d.signal()
	return err
}
