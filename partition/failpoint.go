package partition

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Failpoint names (see the package doc).
const (
	FailpointEntryAppended  = "entry-appended"
	FailpointEntryCommitted = "entry-committed"
	FailpointEntryApplied   = "entry-applied"
	FailpointReplySent      = "reply-sent"
)

// FailpointEnv is the environment variable of the silo binary (cmd/silo) that arms a failpoint
// in its process (ProcessFailpoints).
const FailpointEnv = "ORRERY_FAILPOINT"

// DivergeEnv is the environment variable of the silo binary (cmd/silo) that names a partition
// (a number) whose state the silo's replica changes behind its state machine's back once the
// silo is ready: a key the state machine never writes, in the replica's next apply
// (Host.Diverge). It exists to test the consistency checker.
const DivergeEnv = "ORRERY_DIVERGE"

// ParseDiverge returns the partition a DivergeEnv value names; false when spec is empty.
func ParseDiverge(spec string) (int, bool, error) {
	if spec == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%s=%q: want a partition number", DivergeEnv, spec)
	}
	return n, true, nil
}

// Failpoints decides what happens at a crash boundary. The zero value does nothing.
type Failpoints struct {
	name  string
	at    int64
	hits  atomic.Int64
	fire  func(name string)
	armed bool
	// held: hits are not counted until Begin.
	held atomic.Bool
}

// ProcessFailpoints arms the failpoint spec names ("<name>[:<n>]", a FailpointEnv value; none
// when empty) to SIGKILL the process. Its hits count only from Begin, which a silo calls once it
// is ready, so that the commands of its own start (the bootstrap of its grants) never reach
// the n-th hit.
func ProcessFailpoints(spec string) (*Failpoints, error) {
	if spec == "" {
		return &Failpoints{}, nil
	}
	f, err := NewFailpoints(spec, func(string) { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	if err == nil {
		f.held.Store(true)
	}
	return f, err
}

// Begin starts counting the hits of failpoints armed by ProcessFailpoints (those of
// NewFailpoints count from the start).
func (f *Failpoints) Begin() {
	if f != nil {
		f.held.Store(false)
	}
}

// NewFailpoints arms "<name>[:<n>]" to call fire at the n-th hit (tests pass their own fire).
func NewFailpoints(spec string, fire func(name string)) (*Failpoints, error) {
	name, count, hasCount := strings.Cut(spec, ":")
	at := int64(1)
	if hasCount {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: the hit count must be a positive integer", FailpointEnv, spec)
		}
		at = n
	}
	switch name {
	case FailpointEntryAppended, FailpointEntryCommitted, FailpointEntryApplied, FailpointReplySent:
	default:
		return nil, fmt.Errorf("%s=%q: unknown failpoint %q (want %s, %s, %s or %s)", FailpointEnv, spec, name,
			FailpointEntryAppended, FailpointEntryCommitted, FailpointEntryApplied, FailpointReplySent)
	}
	return &Failpoints{name: name, at: at, fire: fire, armed: true}, nil
}

// Armed returns the failpoint armed and the hit it fires at ("" and 0 when none is).
func (f *Failpoints) Armed() (name string, at int64) {
	if f == nil || !f.armed {
		return "", 0
	}
	return f.name, f.at
}

// Hit records that execution reached the named point.
func (f *Failpoints) Hit(name string) {
	if f == nil || !f.armed || name != f.name || f.held.Load() {
		return
	}
	if f.hits.Add(1) == f.at {
		f.fire(name)
	}
}
