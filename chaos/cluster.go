package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Cluster is a set of silo processes that formed one cluster, each with its own data
// directory, as separate hosts would have. Silos[i] is the latest process started with
// Specs[i]. A Cluster is used from the test's goroutine.
type Cluster struct {
	Specs []*SiloSpec
	Silos []*SiloProcess
}

// StartCluster starts n silos at the same instant from base, each with its own temp data
// directory and free ports, all with the same seed list (every silo's gossip address) and
// --bootstrap-expect n, and waits until each has printed its ready line. Every process is
// killed when the test ends. With base.Isolatable each silo gets a cgroup of its own.
func StartCluster(t TB, n int, base SiloSpec) *Cluster {
	t.Helper()
	if base.Isolatable {
		RequireNetcut(t)
	}
	c := &Cluster{}
	for range n {
		spec := base
		spec.cut = nil // each silo its own cgroup
		spec.DataDir = t.TempDir()
		spec.Port, spec.GossipPort, spec.AdminPort = 0, 0, 0
		spec.choosePorts(t)
		spec.Args = slices.Clone(base.Args)
		spec.Env = slices.Clone(base.Env)
		c.Specs = append(c.Specs, &spec)
	}
	var seeds []string
	for _, spec := range c.Specs {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", spec.GossipPort))
	}
	for _, spec := range c.Specs {
		spec.Seeds = seeds
		spec.BootstrapExpect = n
	}
	BuildSilo(t) // before the clock starts: every silo is launched at once
	for _, spec := range c.Specs {
		c.Silos = append(c.Silos, launchSilo(t, spec))
	}
	// A founder whose port another process took exits at once; it is launched again on a new
	// port at once too, while the others wait for it to form the cluster (they give up after
	// their --open-timeout).
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range c.Silos {
		wg.Go(func() { c.Silos[i], errs[i] = relaunchOnPortClash(t, c.Specs[i], p, readyTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return c
}

// Seeds are the gossip addresses of every silo of the cluster (what each silo was given).
func (c *Cluster) Seeds() []string { return slices.Clone(c.Specs[0].Seeds) }

// Restart starts silo i again with its spec (flags, ports, data directory and, when
// Isolatable, cgroup: isolated still if it was) and waits for its ready line. The previous
// process must have exited.
func (c *Cluster) Restart(t TB, i int) *SiloProcess {
	t.Helper()
	if !c.Silos[i].Exited() {
		t.Fatalf("restart silo %d: its process %d still runs", i, c.Silos[i].PID())
	}
	var err error
	if c.Silos[i], err = relaunchOnPortClash(t, c.Specs[i], launchSilo(t, c.Specs[i]), readyTimeout); err != nil {
		t.Fatalf("restart silo %d: %v\n%s", i, err, c.logs())
	}
	return c.Silos[i]
}

// RestartWithoutWaiting starts silo i again with its spec, as Restart does, but returns at
// once, without waiting for its ready line: a silo whose data dir records its cluster waits
// for a live peer of it without bound (its admin endpoint answering meanwhile, /readyz 503
// saying so), so one started while every other silo is down prints its ready line only once a
// peer is back. AwaitReady waits for the line. The previous process must have exited.
func (c *Cluster) RestartWithoutWaiting(t TB, i int) *SiloProcess {
	t.Helper()
	if !c.Silos[i].Exited() {
		t.Fatalf("restart silo %d: its process %d still runs", i, c.Silos[i].PID())
	}
	c.Silos[i] = launchSilo(t, c.Specs[i])
	return c.Silos[i]
}

// AwaitReady waits up to within for silo i's ready line (at once when it was seen before), and
// launches the silo again, as Restart does, if it exited because a port of its was taken
// meanwhile. The error, when the process exited or was not ready in time, carries its log.
func (c *Cluster) AwaitReady(t TB, i int, within time.Duration) error {
	t.Helper()
	var err error
	c.Silos[i], err = relaunchOnPortClash(t, c.Specs[i], c.Silos[i], within)
	return err
}

// Serving lists the silos whose process runs and is neither paused nor isolated.
func (c *Cluster) Serving() []int {
	var out []int
	for i, p := range c.Silos {
		if !p.Exited() && !p.Paused() && !p.Isolated() {
			out = append(out, i)
		}
	}
	return out
}

// IndexOf is the index of the silo whose id is siloID, -1 when none is.
func (c *Cluster) IndexOf(siloID string) int {
	for i, p := range c.Silos {
		if p.SiloID() == siloID {
			return i
		}
	}
	return -1
}

// tableTimeout bounds one read of a silo's partition table.
const tableTimeout = 3 * time.Second

// Tables reads /v1/partitions from every serving silo, keyed by silo index. A silo that does
// not answer within 3 s is left out.
func (c *Cluster) Tables(ctx context.Context) map[int]*PartitionTable {
	ctx, cancel := context.WithTimeout(ctx, tableTimeout)
	defer cancel()
	serving := c.Serving()
	tables := make([]*PartitionTable, len(serving))
	var wg sync.WaitGroup
	for k, i := range serving {
		wg.Go(func() {
			if table, err := ReadPartitions(ctx, c.Silos[i].AdminAddress()); err == nil {
				tables[k] = table
			}
		})
	}
	wg.Wait()
	out := map[int]*PartitionTable{}
	for k, i := range serving {
		if tables[k] != nil {
			out[i] = tables[k]
		}
	}
	return out
}

// Leaders maps each partition to the index of the serving silo whose replica leads it (the
// highest term when several claim it); a partition no serving silo leads is absent.
func (c *Cluster) Leaders(ctx context.Context) map[int]int {
	return leadersOf(c.Tables(ctx))
}

// leadersOf picks each partition's leader from the silos' tables.
func leadersOf(tables map[int]*PartitionTable) map[int]int {
	leaders := map[int]int{}
	terms := map[int]uint64{}
	for i, table := range tables {
		for _, row := range table.Partitions {
			r := row.Replica
			if r == nil || !r.Leads {
				continue
			}
			if _, seen := leaders[row.Partition]; !seen || uint64(r.Term) > terms[row.Partition] {
				leaders[row.Partition], terms[row.Partition] = i, uint64(r.Term)
			}
		}
	}
	return leaders
}

// LeaderOf is the index of the serving silo leading partition, polled until ctx ends.
func (c *Cluster) LeaderOf(ctx context.Context, partition int) (int, error) {
	for {
		if i, ok := c.Leaders(ctx)[partition]; ok {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no serving silo leads partition %d: %w", partition, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Replication is what one partition's leader reports of its group.
type Replication struct {
	Leader   int // silo index
	Voters   []string
	Learners []string
}

// Replications maps each partition led by a serving silo to its leader's view of the group.
func (c *Cluster) Replications(ctx context.Context) map[int]Replication {
	tables := c.Tables(ctx)
	out := map[int]Replication{}
	for partition, i := range leadersOf(tables) {
		if r := rowOf(tables[i], partition); r != nil {
			out[partition] = Replication{Leader: i, Voters: r.Voters, Learners: r.Learners}
		}
	}
	return out
}

// WaitReplicated polls until every one of partitions partitions has a leader on a serving silo
// whose group has exactly voters voters, no learners and none of the excluded silo ids, or
// until ctx ends; the error then names a partition that is not and what its leader reported.
func (c *Cluster) WaitReplicated(ctx context.Context, partitions, voters int, exclude ...string) error {
	for {
		reps := c.Replications(ctx)
		problem := ""
		for n := range partitions {
			r, ok := reps[n]
			switch {
			case !ok:
				problem = fmt.Sprintf("partition %d has no leader on a serving silo", n)
			case len(r.Voters) != voters || len(r.Learners) > 0:
				problem = fmt.Sprintf("partition %d (led by silo %d) has voters %v and learners %v, want %d voters", n, r.Leader, r.Voters, r.Learners, voters)
			default:
				for _, id := range exclude {
					if slices.Contains(r.Voters, id) {
						problem = fmt.Sprintf("partition %d (led by silo %d) still has voter %s", n, r.Leader, id)
					}
				}
			}
			if problem != "" {
				break
			}
		}
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", problem, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// WaitRejoined polls until silo i serves again as a member of every group that counts it:
// for each of partitions partitions whose leader (on another serving silo, or on silo i)
// lists silo i as a voter or learner, silo i's own replica names that leader and has applied
// at least what the leader had applied when the wait began. At least one group must count
// silo i. The error, when ctx ends first, names a partition that has not caught up.
func (c *Cluster) WaitRejoined(ctx context.Context, i, partitions int) error {
	self := c.Silos[i].SiloID()
	target := map[int]uint64{} // partition → the leader's applied index at the first look
	for {
		tables := c.Tables(ctx)
		leaders := leadersOf(tables)
		problem := ""
		counted := 0
		for n := range partitions {
			leader, ok := leaders[n]
			if !ok {
				problem = fmt.Sprintf("partition %d has no leader on a serving silo", n)
				break
			}
			lead := rowOf(tables[leader], n)
			if lead == nil || (!slices.Contains(lead.Voters, self) && !slices.Contains(lead.Learners, self)) {
				continue
			}
			counted++
			if _, ok := target[n]; !ok {
				target[n] = uint64(lead.AppliedIndex)
			}
			own := rowOf(tables[i], n)
			leaderID := c.Silos[leader].SiloID()
			switch {
			case own == nil:
				problem = fmt.Sprintf("silo %d reports no replica of partition %d", i, n)
			case own.LeaderSilo == nil || *own.LeaderSilo != leaderID:
				problem = fmt.Sprintf("silo %d's replica of partition %d does not name its leader %s", i, n, leaderID)
			case uint64(own.AppliedIndex) < target[n]:
				problem = fmt.Sprintf("silo %d's replica of partition %d applied %d of %d", i, n, own.AppliedIndex, target[n])
			}
			if problem != "" {
				break
			}
		}
		if problem == "" && counted == 0 {
			problem = fmt.Sprintf("no group counts silo %d (%s)", i, self)
		}
		if problem == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", problem, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Served is how long after its start WaitServes saw each condition of a silo serving first
// hold.
type Served struct {
	// Ready is until the silo's /readyz answered 200.
	Ready time.Duration
	// Listed is until every other serving silo listed it alive (GET /v1/silos).
	Listed time.Duration
	// Rejoined is until WaitRejoined returned for it.
	Rejoined time.Duration
}

// All is until every condition held.
func (s Served) All() time.Duration { return max(s.Ready, s.Listed, s.Rejoined) }

// WaitServes polls until silo i serves: its /readyz answers 200, every other serving silo
// lists it alive in GET /v1/silos, and it has rejoined every group that counts it
// (WaitRejoined), or until ctx ends. It reports when each condition first held; the error,
// when ctx ends first, names each condition that did not. The conditions are polled at once,
// each request within 2 s.
func (c *Cluster) WaitServes(ctx context.Context, i, partitions int) (Served, error) {
	started := time.Now()
	p := c.Silos[i]
	var served Served
	var readyErr, listedErr, rejoinedErr error
	poll := func(took *time.Duration, failed *error, check func(context.Context) error) {
		for {
			attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := check(attempt)
			cancel()
			if err == nil {
				*took = time.Since(started)
				return
			}
			select {
			case <-ctx.Done():
				*failed = err
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		poll(&served.Ready, &readyErr, func(ctx context.Context) error {
			if ok, err := httpOK(ctx, "http://"+p.AdminAddress()+"/readyz"); !ok {
				return fmt.Errorf("its /readyz does not answer 200 (%v)", err)
			}
			return nil
		})
	})
	wg.Go(func() {
		poll(&served.Listed, &listedErr, func(ctx context.Context) error {
			for _, j := range c.Serving() {
				if j == i {
					continue
				}
				table, err := ReadSilos(ctx, c.Silos[j].AdminAddress())
				if err != nil {
					return fmt.Errorf("silo %d's /v1/silos: %w", j, err)
				}
				if !slices.ContainsFunc(table.Silos, func(r SiloRow) bool { return r.SiloID == p.SiloID() && r.Alive }) {
					return fmt.Errorf("silo %d does not list it alive", j)
				}
			}
			return nil
		})
	})
	wg.Go(func() {
		// WaitRejoined has its own loop; it is given the whole wait.
		if rejoinedErr = c.WaitRejoined(ctx, i, partitions); rejoinedErr == nil {
			served.Rejoined = time.Since(started)
		}
	})
	wg.Wait()
	var errs []error
	for _, e := range []struct {
		what string
		err  error
	}{{"ready", readyErr}, {"listed alive", listedErr}, {"rejoined", rejoinedErr}} {
		if e.err != nil {
			errs = append(errs, fmt.Errorf("silo %d not %s: %w", i, e.what, e.err))
		}
	}
	return served, errors.Join(errs...)
}

// rowOf is the replica view of partition in table, nil when there is none.
func rowOf(table *PartitionTable, partition int) *ReplicaView {
	if table == nil {
		return nil
	}
	for _, row := range table.Partitions {
		if row.Partition == partition {
			return row.Replica
		}
	}
	return nil
}

// logs renders the tail of every silo's log, for a failure message.
// logsSince is what each silo logged after the byte offsets marks (from logMarks), at most
// the last 20,000 bytes of each.
func (c *Cluster) logsSince(marks []int) string {
	out := ""
	for i, p := range c.Silos {
		log := p.Log()
		if i < len(marks) && marks[i] <= len(log) {
			log = log[marks[i]:]
		}
		if len(log) > 20000 {
			log = "...\n" + log[len(log)-20000:]
		}
		out += fmt.Sprintf("--- silo %d (%s, pid %d, exited %v) since the mark ---\n%s\n", i, p.SiloID(), p.PID(), p.Exited(), log)
	}
	return out
}

// logMarks is the length of each silo's log now, for logsSince.
func (c *Cluster) logMarks() []int {
	marks := make([]int, len(c.Silos))
	for i, p := range c.Silos {
		marks[i] = len(p.Log())
	}
	return marks
}

func (c *Cluster) logs() string {
	out := ""
	for i, p := range c.Silos {
		log := p.Log()
		if len(log) > 8000 {
			log = "...\n" + log[len(log)-8000:]
		}
		out += fmt.Sprintf("--- silo %d (%s, pid %d, exited %v) ---\n%s\n", i, p.SiloID(), p.PID(), p.Exited(), log)
	}
	return out
}
