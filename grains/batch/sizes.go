package batch

import (
	"fmt"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// CheckSizes checks the mutations of a command against the size limits of lim — how many
// there are, and each one's size-limited documents (MutationSizes) — and returns the first
// Validation error, with the field path the partition reports for it
// ("mutations[0].enqueue.payload_json"). The client runs it before sending; the partition runs
// the same checks when it applies.
func CheckSizes(lim input.Limits, mutations []*orreryv1.Mutation) *orrery.Error {
	if err := checkCount(lim, len(mutations)); err != nil {
		return err
	}
	for i, m := range mutations {
		if err := MutationSizes(lim, m); err != nil {
			return orrery.AsError(err).InField(mutationField(i, m))
		}
	}
	return nil
}

// checkCount bounds the mutations of one command.
func checkCount(lim input.Limits, n int) *orrery.Error {
	if n > lim.MaxMutationsPerBatch {
		return orrery.Invalid("mutations", "has %d mutations, more than the limit of %d", n, lim.MaxMutationsPerBatch)
	}
	return nil
}

// MutationSizes checks a mutation's size-limited documents against lim (payload, headers and
// state JSON, directly or in a template); the error names the field relative to the
// mutation's kind ("definition.template.payload_json").
func MutationSizes(lim input.Limits, m *orreryv1.Mutation) error {
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_ConfigureSchedule:
		return input.TemplateSizes("definition.template", k.ConfigureSchedule.GetDefinition().GetTemplate(), lim)
	case *orreryv1.Mutation_Enqueue:
		if err := input.MaxBytes("payload_json", k.Enqueue.GetPayloadJson(), lim.MaxPayloadBytes); err != nil {
			return err
		}
		return input.MaxBytes("headers_json", k.Enqueue.GetHeadersJson(), lim.MaxHeadersBytes)
	case *orreryv1.Mutation_CompareExchangeSaga:
		if err := input.MaxBytes("state_json", k.CompareExchangeSaga.GetStateJson(), lim.MaxStateBytes); err != nil {
			return err
		}
		return input.TemplateSizes("timeout.template", k.CompareExchangeSaga.GetTimeout().GetTemplate(), lim)
	}
	return nil
}

// mutationField is the path of mutation i in a batch's error fields: "mutations[i]", followed
// by its kind's name when it has one.
func mutationField(i int, m *orreryv1.Mutation) string {
	field := fmt.Sprintf("mutations[%d]", i)
	if name := kindName(m); name != "" {
		field += "." + name
	}
	return field
}
