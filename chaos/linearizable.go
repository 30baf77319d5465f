package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// linearizabilityVerdict is what checkLinearizable found over the histories of one kind of
// record (sagas, schedules).
type linearizabilityVerdict struct {
	// histories counts the records checked (each its own history), operations their
	// operations (inferred ones included).
	histories, operations int
	// illegal describes each record whose history is not linearizable; undecided each record
	// the checker could not decide within its time budget.
	illegal, undecided []string
}

// linearizable reports whether every history was decided linearizable.
func (v linearizabilityVerdict) linearizable() bool {
	return len(v.illegal) == 0 && len(v.undecided) == 0
}

// checkLinearizable checks, record by record (records are independent: each is one key of
// one partition, and its operations name it alone), that each record's operations are
// linearizable against model, with porcupine, each within budget. noun names the kind of
// record in the verdict's descriptions ("saga 0000…: history not linearizable: …").
func checkLinearizable(noun string, model porcupine.Model, byRecord map[string][]porcupine.Operation, budget time.Duration) linearizabilityVerdict {
	var v linearizabilityVerdict
	for _, id := range sortedKeys(byRecord) {
		ops := byRecord[id]
		v.histories++
		v.operations += len(ops)
		switch porcupine.CheckOperationsTimeout(model, ops, budget) {
		case porcupine.Illegal:
			v.illegal = append(v.illegal, fmt.Sprintf("%s %s: history not linearizable: %s", noun, id, describeHistory(model, ops)))
		case porcupine.Unknown:
			v.undecided = append(v.undecided, fmt.Sprintf("%s %s: linearizability not decided within %v (%d operations)", noun, id, budget, len(ops)))
		}
	}
	return v
}

// neverReturned is the response instant of an operation whose outcome is unknown: its
// interval never closes, so porcupine may place its effect anywhere after its invocation, or
// after every other operation (which is the same as never).
const neverReturned = math.MaxInt64

// clientInstants maps instants on the client's clock to porcupine's: nanoseconds since base,
// the history's first invocation.
type clientInstants struct{ base time.Time }

// at is t as porcupine's instant.
func (c clientInstants) at(t time.Time) int64 { return t.Sub(c.base).Nanoseconds() }

// returnedAt is the response instant of an operation invoked at call that returned at
// returned, or never (neverReturned) when returned is zero (an unknown outcome). A response
// is never before its invocation.
func (c clientInstants) returnedAt(call, returned time.Time) int64 {
	if returned.IsZero() {
		return neverReturned
	}
	return max(c.at(call), c.at(returned))
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// describeHistory renders a record's operations in invocation order, each by the model's
// DescribeOperation, with their intervals in milliseconds since the history's first
// invocation.
func describeHistory(model porcupine.Model, ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	parts := make([]string, len(sorted))
	for i, op := range sorted {
		returned := "∞"
		if op.Return != neverReturned {
			returned = fmt.Sprintf("%.1f", float64(op.Return)/1e6)
		}
		parts[i] = fmt.Sprintf("[%.1f, %s ms] %s", float64(op.Call)/1e6, returned, model.DescribeOperation(op.Input, op.Output))
	}
	return strings.Join(parts, "; ")
}
