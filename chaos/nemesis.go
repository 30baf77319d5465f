package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orreryhq/orrery/client"
)

// FaultKind names a kind of fault the nemesis injects.
type FaultKind string

// The kinds of fault. Each is held for a random time drawn from the run's seed, then undone,
// and the nemesis waits until the cluster is whole again (every silo ready, every partition
// led, with its full group of voters, and answering a command) before the next one.
const (
	// FaultKill SIGKILLs a silo (most often the leader of a random partition), holds it down
	// 1–6 s, restarts it on its data dir and waits until it has rejoined its groups.
	FaultKill FaultKind = "kill"
	// FaultPause SIGSTOPs a silo (most often a partition's leader) for 4–10 s, beyond failure
	// detection (about 2 s on loopback), then SIGCONTs it.
	FaultPause FaultKind = "pause"
	// FaultIsolate cuts all of a silo's network traffic (actor transport, gossip, admin; both
	// directions) for 4–10 s, then heals it (netcut.go: needs root, cgroup v2 and nft).
	FaultIsolate FaultKind = "isolate"
	// FaultWipe SIGKILLs a silo, deletes its data dir, waits until the groups have removed it
	// (after --dead-after) and starts it again on the empty dir: a replacement host.
	FaultWipe FaultKind = "wipe"
	// FaultRollingRestart stops each silo in turn with SIGTERM, starts it again and waits
	// until it has rejoined its groups.
	FaultRollingRestart FaultKind = "rolling-restart"
	// FaultFailpoint SIGKILLs a silo (most often a partition's leader), starts it again with a
	// crash failpoint armed at a random boundary (partition.FailpointEnv; the due
	// coordinator's emission and saga expiry commands among them), waits until it kills itself
	// there, and starts it again unarmed.
	FaultFailpoint FaultKind = "failpoint"
	// FaultSkew SIGKILLs a silo (most often a partition's leader), starts it again with its
	// wall clock offset by up to ±10 min (ClockOffsetEnv) for 10–30 s, then SIGKILLs it and
	// starts it again on the real clock. The skewed silo, clock-unfit, leads no partition.
	FaultSkew FaultKind = "skew"
	// FaultZoneRules SIGKILLs a silo (most often a partition's leader), starts it again with
	// ZONEINFO naming other Europe/Berlin rules for 10–30 s, then SIGKILLs it and starts it
	// again without.
	FaultZoneRules FaultKind = "zone-rules"
	// FaultSplit cuts a cluster of five or more silos in two for 4–10 s: a minority (two of
	// five), often with a partition's leader, apart from the others, each side whole within
	// (netsplit.go: needs what FaultIsolate needs), then heals it.
	FaultSplit FaultKind = "split"
	// FaultCombined injects two faults at once on two silos, never more than a minority down:
	// a kill, pause or isolation of one silo while a second is killed, paused or isolated too
	// (five silos or more) or runs on a skewed clock (fewer).
	FaultCombined FaultKind = "combined"
	// FaultFullDisk restarts a silo (most often a partition's leader) reading its free disk
	// space from a file (FreeBytesFileEnv), fills its disk for 4–10 s (the file says 0 bytes),
	// and empties it again: the silo must refuse new work, stay up and recover on its own.
	FaultFullDisk FaultKind = "full-disk"
)

// AllFaultKinds lists every kind of fault, in the order a run's rotation starts from.
var AllFaultKinds = []FaultKind{FaultKill, FaultPause, FaultIsolate, FaultWipe, FaultRollingRestart, FaultFailpoint, FaultSkew, FaultZoneRules, FaultSplit, FaultCombined, FaultFullDisk}

// Fault is one fault the nemesis injected, as the report lists it.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Silo is the silo's index (-1 for a rolling restart), SiloID its id when the fault began.
	Silo   int    `json:"silo"`
	SiloID string `json:"silo_id,omitempty"`
	// Partition is the partition whose leader the silo was when it was chosen so (-1: chosen
	// at random).
	Partition int `json:"partition"`
	// Start is when the fault began, Undone when it was undone (restart, SIGCONT, heal), and
	// Recovered when the cluster was whole again (zero if it was not within the bound).
	Start     time.Time `json:"start"`
	Undone    time.Time `json:"undone"`
	Recovered time.Time `json:"recovered"`
	// Parts are the kinds of the faults a combined fault injected at once.
	Parts []FaultKind `json:"parts,omitempty"`
	// Detail says what was done; Error what went wrong doing it, or recovering.
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ProcessExit is a silo exit the nemesis did not cause: a crash, an exit on its own, an exit
// before ready after a restart, or a failure at SIGTERM.
type ProcessExit struct {
	Time    time.Time `json:"time"`
	Silo    int       `json:"silo"`
	SiloID  string    `json:"silo_id"`
	PID     int       `json:"pid"`
	Status  string    `json:"status"`
	LogTail string    `json:"log_tail"`
}

// nemesisTimings are how long the nemesis holds faults and waits between them.
type nemesisTimings struct {
	// GapMin and GapMax bound the recovery gap between one fault's recovery and the next.
	GapMin, GapMax time.Duration
	// RecoveryTimeout bounds the wait for the cluster to be whole again after a fault.
	RecoveryTimeout time.Duration
	// DeadAfter is the silos' --dead-after.
	DeadAfter time.Duration
}

// nemesis injects one fault at a time into a cluster, from the goroutine that runs it (which
// owns the cluster), and watches every silo process for exits it did not cause.
type nemesis struct {
	t        TB
	cl       *Cluster
	timings  nemesisTimings
	rng      *rand.Rand
	kinds    []FaultKind
	logf     func(format string, args ...any)
	voters   int
	rotation []FaultKind

	faults   []Fault
	problems []string

	mu       sync.Mutex
	expected map[*SiloProcess]bool // exits the nemesis causes
	watched  map[*SiloProcess]int  // process → silo index, while it runs
	exits    []ProcessExit
	launched []*SiloProcess
	ahead    clockAhead
	zoneinfo string    // FaultZoneRules's zone database, once written
	cut      *netSplit // FaultSplit's split while it holds
	// probe is the client awaitWhole sends each partition a command through, once set (nil
	// until the run has dialled the cluster).
	probe *client.Client
	stop  chan struct{}
	done  chan struct{}
}

// newNemesis watches cl's processes from now on.
func newNemesis(t TB, cl *Cluster, seed uint64, kinds []FaultKind, timings nemesisTimings, logf func(string, ...any)) *nemesis {
	n := &nemesis{t: t, cl: cl, timings: timings, rng: rand.New(rand.NewPCG(seed, 0)), kinds: kinds, logf: logf,
		voters:   min(cl.Specs[0].Replicas, len(cl.Specs)),
		expected: map[*SiloProcess]bool{}, watched: map[*SiloProcess]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	for i := range cl.Silos {
		n.register(i)
	}
	go n.watch()
	return n
}

// register watches silo i's current process.
func (n *nemesis) register(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.cl.Silos[i]
	n.watched[p] = i
	n.launched = append(n.launched, p)
}

// expectExit marks p's coming exit as the nemesis's doing.
func (n *nemesis) expectExit(p *SiloProcess) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.expected[p] = true
}

// processExit records an exit the nemesis did not cause.
func (n *nemesis) processExit(i int, p *SiloProcess, status string) {
	log := p.Log()
	if len(log) > 6000 {
		log = "...\n" + log[len(log)-6000:]
	}
	e := ProcessExit{Time: time.Now().UTC(), Silo: i, SiloID: p.SiloID(), PID: p.PID(), Status: status, LogTail: log}
	n.mu.Lock()
	n.exits = append(n.exits, e)
	n.mu.Unlock()
	n.logf("PROCESS EXIT: silo %d (%s, pid %d) %s; the tail of its log:\n%s", i, e.SiloID, e.PID, status, log)
}

// watch polls the watched processes every 200 ms until halt and records each exit that was
// not expected.
func (n *nemesis) watch() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		n.mu.Lock()
		var gone []*SiloProcess
		for p := range n.watched {
			if p.Exited() {
				gone = append(gone, p)
			}
		}
		var unexpected []*SiloProcess
		indices := map[*SiloProcess]int{}
		for _, p := range gone {
			indices[p] = n.watched[p]
			delete(n.watched, p)
			if !n.expected[p] {
				unexpected = append(unexpected, p)
			}
		}
		n.mu.Unlock()
		for _, p := range unexpected {
			n.processExit(indices[p], p, fmt.Sprintf("exited on its own: %v", p.Wait(time.Second)))
		}
	}
}

// halt stops watching.
func (n *nemesis) halt() {
	close(n.stop)
	<-n.done
}

// run injects faults, one at a time, each after a recovery gap, until until (a fault begun
// before it is carried to its end) or ctx ends. The kinds come in a rotation reshuffled each
// round, so that every kind is injected once per round.
func (n *nemesis) run(ctx context.Context, until time.Time) {
	for {
		if !n.sleep(ctx, between(n.rng, n.timings.GapMin, n.timings.GapMax)) || !time.Now().Before(until) {
			return
		}
		n.inject(ctx, n.nextKind())
	}
}

// nextKind is the next kind of the rotation.
func (n *nemesis) nextKind() FaultKind {
	if len(n.rotation) == 0 {
		n.rotation = append([]FaultKind(nil), n.kinds...)
		n.rng.Shuffle(len(n.rotation), func(i, j int) { n.rotation[i], n.rotation[j] = n.rotation[j], n.rotation[i] })
	}
	kind := n.rotation[0]
	n.rotation = n.rotation[1:]
	return kind
}

// sleep waits d, or until ctx ends, reporting whether ctx is still live.
func (n *nemesis) sleep(ctx context.Context, d time.Duration) bool { return sleep(ctx, d) }

// target chooses a silo: seven times in ten the leader of a random partition, otherwise a
// random silo. It returns the partition (-1 when chosen at random).
func (n *nemesis) target(ctx context.Context) (silo, partition int) {
	partition = n.rng.IntN(n.cl.Specs[0].Partitions)
	silo = n.rng.IntN(len(n.cl.Silos))
	if n.rng.IntN(10) < 7 {
		lookCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if leader, err := n.cl.LeaderOf(lookCtx, partition); err == nil {
			return leader, partition
		}
	}
	return silo, -1
}

// inject injects one fault of kind, holds it, undoes it and waits for the cluster to recover.
func (n *nemesis) inject(ctx context.Context, kind FaultKind) {
	f := Fault{Kind: kind, Silo: -1, Partition: -1, Start: time.Now().UTC()}
	var err error
	switch kind {
	case FaultKill:
		err = n.kill(ctx, &f)
	case FaultPause:
		err = n.pause(ctx, &f)
	case FaultIsolate:
		err = n.isolate(ctx, &f)
	case FaultWipe:
		err = n.wipe(ctx, &f)
	case FaultRollingRestart:
		err = n.rollingRestart(ctx, &f)
	case FaultFailpoint:
		err = n.failpoint(ctx, &f)
	case FaultSkew:
		err = n.skew(ctx, &f)
	case FaultZoneRules:
		err = n.zoneRules(ctx, &f)
	case FaultSplit:
		err = n.split(ctx, &f)
	case FaultCombined:
		err = n.combined(ctx, &f)
	case FaultFullDisk:
		err = n.fullDisk(ctx, &f)
	}
	if f.Undone.IsZero() {
		f.Undone = time.Now().UTC()
	}
	if err != nil {
		f.Error = err.Error()
		n.logf("fault %d (%s) failed: %v", len(n.faults)+1, kind, err)
	}
	if err := n.awaitWhole(ctx, fmt.Sprintf("fault %d (%s)", len(n.faults)+1, kind)); err != nil {
		f.Error = strings.TrimPrefix(f.Error+"; "+err.Error(), "; ")
	} else {
		f.Recovered = time.Now().UTC()
	}
	n.faults = append(n.faults, f)
	n.logf("fault %d (%s) over: undone %s, recovered %s", len(n.faults), kind, stamp(f.Undone), stamp(f.Recovered))
}

// stamp renders an instant in UTC with milliseconds, "-" for the zero instant.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// describe names silo i for the fault log.
func (n *nemesis) describe(f *Fault, i, partition int) string {
	f.Silo, f.SiloID, f.Partition = i, n.cl.Silos[i].SiloID(), partition
	role := "chosen at random"
	if partition >= 0 {
		role = fmt.Sprintf("leader of partition %d", partition)
	}
	return fmt.Sprintf("silo %d (%s, pid %d, %s)", i, f.SiloID, n.cl.Silos[i].PID(), role)
}

// kill SIGKILLs a silo, holds it down 1–6 s, restarts it and waits until it has rejoined.
func (n *nemesis) kill(ctx context.Context, f *Fault) error {
	i, partition := n.target(ctx)
	down := between(n.rng, time.Second, 6*time.Second)
	f.Detail = fmt.Sprintf("SIGKILL %s, down %v", n.describe(f, i, partition), down.Round(time.Millisecond))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	p := n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	n.sleep(ctx, down)
	if err := n.restart(i); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	return n.awaitRejoined(ctx, i)
}

// pause SIGSTOPs a silo for 4–10 s, then SIGCONTs it and waits until it serves.
func (n *nemesis) pause(ctx context.Context, f *Fault) error {
	return n.hold(ctx, f, "SIGSTOP", (*SiloProcess).Pause, (*SiloProcess).Resume)
}

// isolate cuts all of a silo's traffic for 4–10 s, then heals it and waits until it serves.
func (n *nemesis) isolate(ctx context.Context, f *Fault) error {
	return n.hold(ctx, f, "isolate all traffic of", (*SiloProcess).Isolate, (*SiloProcess).Heal)
}

// hold applies a fault (start) to a target silo for 4–10 s, undoes it (stop) and waits until
// the silo serves again; what names the fault in the log.
func (n *nemesis) hold(ctx context.Context, f *Fault, what string, start, stop func(*SiloProcess) error) error {
	i, partition := n.target(ctx)
	held := between(n.rng, 4*time.Second, 10*time.Second)
	f.Detail = fmt.Sprintf("%s %s for %v", what, n.describe(f, i, partition), held.Round(time.Millisecond))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	p := n.cl.Silos[i]
	if err := start(p); err != nil {
		return err
	}
	n.sleep(ctx, held)
	if err := stop(p); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	return n.awaitServes(ctx, i)
}

// wipe SIGKILLs a silo, deletes its data dir, waits until every group has removed it and
// starts it again on the empty dir, as a new silo, waiting until the groups have it again.
func (n *nemesis) wipe(ctx context.Context, f *Fault) error {
	i, partition := n.target(ctx)
	f.Detail = fmt.Sprintf("SIGKILL %s and delete its data dir", n.describe(f, i, partition))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	p := n.cl.Silos[i]
	old := p.SiloID()
	n.expectExit(p)
	p.Kill()
	if err := os.RemoveAll(n.cl.Specs[i].DataDir); err != nil {
		return err
	}
	partitions := n.cl.Specs[0].Partitions
	removed := min(n.voters, len(n.cl.Silos)-1)
	waitCtx, cancel := context.WithTimeout(ctx, n.timings.DeadAfter+90*time.Second)
	err := n.cl.WaitReplicated(waitCtx, partitions, removed, old)
	cancel()
	if err != nil {
		return fmt.Errorf("the groups did not remove silo %d (%s) after its disk was lost: %w", i, old, err)
	}
	n.logf("fault %d: every group removed silo %d (%s); starting it again on an empty data dir", len(n.faults)+1, i, old)
	if err := n.restart(i); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	f.Detail += fmt.Sprintf("; started again as silo %s", n.cl.Silos[i].SiloID())
	waitCtx, cancel = context.WithTimeout(ctx, n.timings.RecoveryTimeout)
	defer cancel()
	if err := n.cl.WaitReplicated(waitCtx, partitions, n.voters, old); err != nil {
		return fmt.Errorf("the groups did not take silo %d back as %s: %w", i, n.cl.Silos[i].SiloID(), err)
	}
	return nil
}

// rollingRestart stops each silo in turn with SIGTERM (up to 30 s), starts it again and waits
// until it has rejoined its groups. A silo that exits with an error on SIGTERM is a process
// exit.
func (n *nemesis) rollingRestart(ctx context.Context, f *Fault) error {
	f.Detail = fmt.Sprintf("SIGTERM and restart each of the %d silos in turn", len(n.cl.Silos))
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	for i := range n.cl.Silos {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p := n.cl.Silos[i]
		n.expectExit(p)
		if err := p.Terminate(30 * time.Second); err != nil {
			if p.Exited() {
				n.processExit(i, p, fmt.Sprintf("failed at SIGTERM: %v", err))
			} else {
				n.logf("silo %d did not stop within 30 s of SIGTERM; SIGKILL", i)
				p.Kill()
			}
		}
		if err := n.restart(i); err != nil {
			return err
		}
		if err := n.awaitRejoined(ctx, i); err != nil {
			return err
		}
		n.logf("fault %d: silo %d restarted and rejoined", len(n.faults)+1, i)
	}
	return nil
}

// restart starts silo i again (its process has exited) and waits for its ready line; an exit
// before ready is a process exit.
func (n *nemesis) restart(i int) error { return n.restartWith(i) }

// restartWith is restart with env added to the silo's environment for this launch only.
func (n *nemesis) restartWith(i int, env ...string) error {
	spec := n.cl.Specs[i]
	saved := spec.Env
	spec.Env = append(slices.Clone(saved), env...)
	defer func() { spec.Env = saved }()
	n.cl.RestartWithoutWaiting(n.t, i)
	err := n.cl.AwaitReady(n.t, i, readyTimeout)
	p := n.cl.Silos[i]
	if err != nil && p.Exited() {
		n.processExit(i, p, fmt.Sprintf("exited before ready after a restart: %v", p.Wait(time.Second)))
		return fmt.Errorf("restart silo %d: it exited before ready", i)
	}
	n.register(i) // watched even when not ready yet
	if err != nil {
		return fmt.Errorf("restart silo %d: %v", i, firstLine(err.Error()))
	}
	return nil
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// awaitRejoined waits (up to the recovery timeout) until silo i has rejoined its groups.
func (n *nemesis) awaitRejoined(ctx context.Context, i int) error {
	waitCtx, cancel := context.WithTimeout(ctx, n.timings.RecoveryTimeout)
	defer cancel()
	return n.cl.WaitRejoined(waitCtx, i, n.cl.Specs[0].Partitions)
}

// awaitServes waits (up to the recovery timeout) until silo i serves again: ready, listed
// alive by the others, rejoined.
func (n *nemesis) awaitServes(ctx context.Context, i int) error {
	waitCtx, cancel := context.WithTimeout(ctx, n.timings.RecoveryTimeout)
	defer cancel()
	_, err := n.cl.WaitServes(waitCtx, i, n.cl.Specs[0].Partitions)
	return err
}

// repair restarts every silo whose process has exited (an exit the watcher recorded), none
// being paused or isolated by the nemesis between faults.
func (n *nemesis) repair() {
	for i, p := range n.cl.Silos {
		if p.Exited() {
			n.logf("silo %d (%s) is down; restarting it", i, p.SiloID())
			if err := n.restart(i); err != nil {
				n.logf("%v", err)
			}
		}
	}
}

// awaitWhole waits up to the recovery timeout until the cluster is whole: every silo's process
// runs (repair restarts one that exited), none is paused or isolated, each answers /readyz,
// every partition has a leader with its full group of voters, that group is its target set
// over the serving silos (unsettled: placement has finished moving it), and, once the nemesis
// has a probe client, every partition answers a command (probePartitions: a Raft table can
// look whole while a partition answers nothing). Past the bound it records a problem and
// returns it.
func (n *nemesis) awaitWhole(ctx context.Context, after string) error {
	deadline := time.Now().Add(n.timings.RecoveryTimeout)
	problem := ""
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.repair()
		if n.cut != nil {
			if err := n.cut.Heal(); err != nil {
				n.logf("heal the split: %v", err)
			} else {
				n.cut = nil
			}
		}
		for i, p := range n.cl.Silos {
			if p.Paused() {
				_ = p.Resume()
			}
			if p.Isolated() {
				if err := p.Heal(); err != nil {
					n.logf("heal silo %d: %v", i, err)
				}
			}
		}
		problem = ""
		for i, p := range n.cl.Silos {
			callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ok, err := httpOK(callCtx, "http://"+p.AdminAddress()+"/readyz")
			cancel()
			if !ok {
				problem = fmt.Sprintf("silo %d's /readyz does not answer 200 (%v)", i, err)
				break
			}
		}
		if problem == "" {
			waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := n.cl.WaitReplicated(waitCtx, n.cl.Specs[0].Partitions, n.voters); err != nil {
				problem = err.Error()
			}
			cancel()
		}
		if problem == "" {
			var ids []string
			for _, i := range n.cl.Serving() {
				ids = append(ids, n.cl.Silos[i].SiloID())
			}
			if err := unsettled(n.cl.Replications(ctx), ids, n.voters); err != nil {
				problem = err.Error()
			}
		}
		if problem == "" && n.probe != nil {
			if err := probePartitions(ctx, n.probe, n.cl.Specs[0].Partitions, probeTimeout); err != nil {
				problem = err.Error()
			}
		}
		if problem == "" {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("the cluster was not whole within %v of %s: %s", n.timings.RecoveryTimeout, after, problem)
			n.problems = append(n.problems, err.Error())
			n.logf("RECOVERY: %v", err)
			return err
		}
		n.sleep(ctx, 500*time.Millisecond)
	}
}

// counts are how many faults of each kind were injected.
func (n *nemesis) counts() map[FaultKind]int {
	out := map[FaultKind]int{}
	for _, f := range n.faults {
		out[f.Kind]++
		for _, part := range f.Parts {
			out[part]++
		}
	}
	return out
}

// processExits is a copy of the exits recorded so far.
func (n *nemesis) processExits() []ProcessExit {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]ProcessExit(nil), n.exits...)
}

// liveAdminAddresses lists the admin addresses of the silo processes running now (started and
// not seen exited), for readers on other goroutines: the cluster's own table is the nemesis's.
func (n *nemesis) liveAdminAddresses() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	addresses := make([]string, 0, len(n.watched))
	for p := range n.watched {
		addresses = append(addresses, p.AdminAddress())
	}
	slices.Sort(addresses)
	return addresses
}

// processes lists every silo process started during the run, the first ones first.
func (n *nemesis) processes() []*SiloProcess {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*SiloProcess(nil), n.launched...)
}

// ClockOffsetEnv is the environment variable of the silo binary (cmd/silo), for testing only,
// that offsets its wall clock by a signed duration ("+7m"): FaultSkew's.
const ClockOffsetEnv = "ORRERY_CLOCK_OFFSET"
