package input

import (
	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/keys"
)

// MaxPriority is the highest priority a queue message may have (Enqueue.priority,
// MessageTemplate.priority): priorities run 0 (the default) to MaxPriority, higher first, one
// visibility-index band each (keys.PriorityBandPrefix).
const MaxPriority = keys.MaxPriority

// MaxPriorityStepMicros bounds Limits.PriorityStepMicros.
const MaxPriorityStepMicros = Day

// Priority checks a message priority: 0..MaxPriority.
func Priority(field string, priority int32) error {
	if priority < 0 || priority > MaxPriority {
		return orrery.Invalid(field, "must be between 0 (the default) and %d, got %d", MaxPriority, priority)
	}
	return nil
}

// PriorityStep checks a priority step (Limits.PriorityStepMicros): 0 (strict priority) to
// MaxPriorityStepMicros.
func PriorityStep(field string, stepMicros int64) error {
	if stepMicros < 0 || stepMicros > MaxPriorityStepMicros {
		return orrery.Invalid(field, "must be between 0 (strict priority) and %s, got %s", FormatDuration(MaxPriorityStepMicros), FormatDuration(stepMicros))
	}
	return nil
}
