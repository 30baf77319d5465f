package batch

import (
	"reflect"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// LoadLimits returns the limits the partition applies under: those its state holds
// (keys.PartitionLimits, written by SetLimits), or input.DefaultLimits() while it holds none.
// Every replica reads the same, whatever its own configuration says.
func LoadLimits(r kv.Reader) (input.Limits, error) {
	held := &orreryv1.PartitionLimits{}
	found, err := record.Load(r, keys.PartitionLimits, held)
	if err != nil || !found {
		return input.DefaultLimits(), err
	}
	return input.LimitsOf(held), nil
}

// applySetLimits validates m's limits (every one positive, but the priority step, which may
// be 0: input.PriorityStep) and makes them the partition's. Limits without a priority step
// (those a leader proposes before ApplyVersionPriority) are stored without one, as a release
// that does not know it stores them.
func applySetLimits(v kv.View, m *orreryv1.SetLimits) error {
	lim := input.LimitsOf(m.GetLimits())
	if err := input.PriorityStep("limits.priority_step_micros", lim.PriorityStepMicros); err != nil {
		return err
	}
	value := reflect.ValueOf(lim)
	for i := range value.NumField() {
		if value.Type().Field(i).Name == "PriorityStepMicros" {
			continue
		}
		f := value.Field(i)
		positive := f.CanInt() && f.Int() > 0 || f.CanUint() && f.Uint() > 0
		if !positive {
			return orrery.Invalid("limits."+snake(value.Type().Field(i).Name), "must be positive, got %v", f.Interface())
		}
	}
	held := lim.Proto()
	if m.GetLimits().PriorityStepMicros == nil {
		held.PriorityStepMicros = nil
	}
	_, err := record.Store(v, keys.PartitionLimits, held)
	return err
}

// snake renders a Go field name (MaxPayloadBytes) as its proto field name (max_payload_bytes).
func snake(name string) string {
	out := make([]byte, 0, len(name)+4)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				out = append(out, '_')
			}
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return string(out)
}
