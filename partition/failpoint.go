package partition

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/replication"
)

// Failpoint names (see the package doc).
const (
	FailpointEntryAppended  = "entry-appended"
	FailpointEntryCommitted = "entry-committed"
	FailpointEntryApplied   = "entry-applied"
	FailpointReplySent      = "reply-sent"
)

// Command kinds a failpoint of the entry-committed or entry-applied boundary can be narrowed
// to, as a prefix of its name ("due-entry-applied"): it then counts only the hits of a round
// with an entry of that kind.
const (
	// FailpointKindDue is a due coordinator's command that emits occurrences (a due command
	// carrying EmitOccurrences).
	FailpointKindDue = "due"
	// FailpointKindExpire is a command that expires sagas (carrying ExpireSaga: the due
	// coordinator's saga expiry).
	FailpointKindExpire = "expire"
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
	kind  string // "": every command
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

// NewFailpoints arms "[<kind>-]<name>[:<n>]" to call fire at the n-th hit (tests pass their
// own fire); fire is given the name without its kind.
func NewFailpoints(spec string, fire func(name string)) (*Failpoints, error) {
	name, count, hasCount := strings.Cut(spec, ":")
	kind := ""
	for _, k := range []string{FailpointKindDue, FailpointKindExpire} {
		if rest, ok := strings.CutPrefix(name, k+"-"); ok && (rest == FailpointEntryCommitted || rest == FailpointEntryApplied) {
			kind, name = k, rest
		}
	}
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
		return nil, fmt.Errorf("%s=%q: unknown failpoint %q (want %s, %s, %s or %s, the middle two optionally prefixed %s- or %s-)",
			FailpointEnv, spec, name, FailpointEntryAppended, FailpointEntryCommitted, FailpointEntryApplied, FailpointReplySent,
			FailpointKindDue, FailpointKindExpire)
	}
	return &Failpoints{name: name, kind: kind, at: at, fire: fire, armed: true}, nil
}

// Armed returns the failpoint armed, its kind prefix included, and the hit it fires at ("" and
// 0 when none is).
func (f *Failpoints) Armed() (name string, at int64) {
	if f == nil || !f.armed {
		return "", 0
	}
	if f.kind != "" {
		return f.kind + "-" + f.name, f.at
	}
	return f.name, f.at
}

// Hit records that execution reached the named point, for commands of any kind: a failpoint
// narrowed to a kind ignores it.
func (f *Failpoints) Hit(name string) { f.hit(name, nil) }

// HitEntries records that execution reached the named point for a round of entries: a
// failpoint narrowed to a kind counts it only when one of the entries is of that kind.
func (f *Failpoints) HitEntries(name string, entries []replication.Entry) { f.hit(name, entries) }

func (f *Failpoints) hit(name string, entries []replication.Entry) {
	if f == nil || !f.armed || name != f.name || f.held.Load() {
		return
	}
	if f.kind != "" && !slices.ContainsFunc(entries, f.ofKind) {
		return
	}
	if f.hits.Add(1) == f.at {
		f.fire(name)
	}
}

// ofKind reports whether e's command is of the failpoint's kind.
func (f *Failpoints) ofKind(e replication.Entry) bool {
	cmd := &orreryv1.PartitionCommand{}
	if proto.Unmarshal(e.GetCommand(), cmd) != nil {
		return false
	}
	return slices.ContainsFunc(cmd.GetBatch().GetMutations(), func(m *orreryv1.Mutation) bool {
		switch f.kind {
		case FailpointKindDue:
			return cmd.GetDue() && m.GetEmitOccurrences() != nil
		case FailpointKindExpire:
			return m.GetExpireSaga() != nil
		}
		return false
	})
}
