package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/orreryhq/orrery/partition"
)

// failpointBoundaries are the crash boundaries FaultFailpoint arms, each at random: every
// boundary of every command, and the two narrowed to the due coordinator's commands, its
// emission and its saga expiry (package partition's failpoints).
var failpointBoundaries = []string{
	partition.FailpointKindDue + "-" + partition.FailpointEntryApplied,
	partition.FailpointKindExpire + "-" + partition.FailpointEntryApplied,
	partition.FailpointKindDue + "-" + partition.FailpointEntryCommitted,
	partition.FailpointKindExpire + "-" + partition.FailpointEntryCommitted,
	partition.FailpointEntryAppended,
	partition.FailpointEntryCommitted,
	partition.FailpointEntryApplied,
	partition.FailpointReplySent,
}

// failpointFireWithin bounds how long FaultFailpoint waits for an armed silo to reach its
// failpoint: the workload's Every-1s schedules and few-second saga deadlines reach every
// boundary within seconds.
const failpointFireWithin = 60 * time.Second

// failpoint SIGKILLs a silo (most often a partition's leader), starts it again with
// partition.FailpointEnv armed at a random boundary and hit (1–3), waits until the process
// kills itself there (its expected exit), and starts it again unarmed, waiting until it has
// rejoined. An armed silo that exits otherwise is a process exit; one that does not reach the
// failpoint within failpointFireWithin is killed, and the fault says so.
func (n *nemesis) failpoint(ctx context.Context, f *Fault) error {
	i, leads := n.target(ctx)
	armed := fmt.Sprintf("%s:%d", failpointBoundaries[n.rng.IntN(len(failpointBoundaries))], 1+n.rng.IntN(3))
	return n.failpointAt(ctx, f, i, leads, armed)
}

// failpointAt is failpoint with its choices made: silo i (the leader of partition leads, or
// -1), armed with armed ("<name>:<hit>").
func (n *nemesis) failpointAt(ctx context.Context, f *Fault, i, leads int, armed string) error {
	f.Detail = fmt.Sprintf("SIGKILL %s and restart it with %s=%s", n.describe(f, i, leads), partition.FailpointEnv, armed)
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	p := n.cl.Silos[i]
	n.expectExit(p)
	p.Kill()
	p, err := n.launchExpectingExit(i, partition.FailpointEnv+"="+armed)
	if err != nil {
		return err
	}
	armedAt := time.Now()
	exitErr := p.Wait(failpointFireWithin)
	switch {
	case !p.Exited():
		f.Detail += fmt.Sprintf("; it did not reach the failpoint within %v: SIGKILL", failpointFireWithin)
		p.Kill()
	case killedBySIGKILL(exitErr):
		f.Detail += fmt.Sprintf("; it killed itself at the failpoint %v after it was ready", time.Since(armedAt).Round(time.Millisecond))
	default:
		n.processExit(i, p, fmt.Sprintf("armed with %s=%s, exited otherwise than at the failpoint: %v", partition.FailpointEnv, armed, exitErr))
	}
	n.logf("fault %d: %s", len(n.faults)+1, f.Detail)
	if err := n.restart(i); err != nil {
		return err
	}
	f.Undone = time.Now().UTC()
	return n.awaitRejoined(ctx, i)
}

// launchExpectingExit starts silo i again (its process has exited) with env added to its
// environment for this launch only, marks the new process's exit as the nemesis's doing, and
// waits for its ready line or its exit (a failpoint may fire before the ready line is read).
// An exit before ready that was not a SIGKILL is a process exit.
func (n *nemesis) launchExpectingExit(i int, env ...string) (*SiloProcess, error) {
	spec := n.cl.Specs[i]
	saved := spec.Env
	spec.Env = append(slices.Clone(saved), env...)
	defer func() { spec.Env = saved }()
	n.expectExit(n.cl.RestartWithoutWaiting(n.t, i))
	err := n.cl.AwaitReady(n.t, i, readyTimeout) // may launch it again on a port clash
	p := n.cl.Silos[i]
	n.expectExit(p)
	n.register(i)
	switch {
	case err == nil:
		return p, nil
	case p.Exited() && killedBySIGKILL(p.Wait(time.Second)):
		return p, nil
	case p.Exited():
		n.processExit(i, p, fmt.Sprintf("started with %v, exited before ready: %v", env, p.Wait(time.Second)))
		return p, fmt.Errorf("restart silo %d with %v: it exited before ready", i, env)
	default:
		return p, fmt.Errorf("restart silo %d with %v: %v", i, env, firstLine(err.Error()))
	}
}

// killedBySIGKILL reports whether a process's exit error says SIGKILL ended it.
func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	status, ok := exit.Sys().(syscall.WaitStatus)
	return ok && status.Signaled() && status.Signal() == syscall.SIGKILL
}
