package grants

import (
	"math/bits"
	"strconv"
	"strings"
)

// Capability is one bit of a GrantRule's capability mask. The numbers are frozen: a new
// capability takes the next free bit and no bit is ever renumbered or reused, so stored
// grants keep their meaning.
type Capability uint64

// The capabilities (docs/design.md §8).
const (
	// SchedulerManage configures, pauses, resumes, triggers, cancels and deletes schedules; a
	// schedule's creator needs it for its schedule to emit.
	SchedulerManage Capability = 1 << 0
	// SagaManage creates and updates sagas; a saga's creator needs it for every update and
	// for the timeout.
	SagaManage Capability = 1 << 1
	// QueuePublish enqueues into a queue, directly or through a schedule's occurrences or a
	// saga's timeout; with QueueConsume, it redrives the queue's dead letters, pauses and
	// resumes the queue and cancels its messages.
	QueuePublish Capability = 1 << 2
	// QueueConsume receives, acks, releases and extends leases of a queue's messages; with
	// QueuePublish, see there.
	QueueConsume Capability = 1 << 3
	// QueueInspect reads schedules, sagas, lanes, ledgers and lists.
	QueueInspect Capability = 1 << 4
	// PolicyAdmin changes grants.
	PolicyAdmin Capability = 1 << 5
)

// All is every capability defined. A grant of All holds what exists when it is written: it
// does not gain a capability appended later.
const All = SchedulerManage | SagaManage | QueuePublish | QueueConsume | QueueInspect | PolicyAdmin

// names are the capabilities' names, by bit.
var names = []string{"SchedulerManage", "SagaManage", "QueuePublish", "QueueConsume", "QueueInspect", "PolicyAdmin"}

// String names the capabilities of c, joined by "|".
func (c Capability) String() string {
	if c == 0 {
		return "none"
	}
	var parts []string
	for rest := uint64(c); rest != 0; rest &= rest - 1 {
		bit := bits.TrailingZeros64(rest)
		if bit < len(names) {
			parts = append(parts, names[bit])
		} else {
			parts = append(parts, "bit"+strconv.Itoa(bit))
		}
	}
	return strings.Join(parts, "|")
}

// Named returns the capability of a name as String spells it, or false.
func Named(name string) (Capability, bool) {
	for bit, n := range names {
		if n == name {
			return 1 << bit, true
		}
	}
	return 0, false
}
