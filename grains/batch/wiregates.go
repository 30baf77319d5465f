package batch

import (
	"cmp"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// A part of the command wire an apply version introduced: a field of a message (its presence:
// a proto3 field is on the wire when it is not zero), or one value of an enum field.
type wireGate struct {
	version uint32
	message protoreflect.FullName
	field   protoreflect.Name
	value   protoreflect.Name // "" gates the field's presence, else this value of its enum
}

// wireGates are the parts of the command wire each apply version above 1 introduced. A command
// that carries one while its partition applies under an older version is refused, and so is one
// that carries a field or an enum value this binary does not know at all (checkWire), with the
// same error either way, so that a replica of an older release, to which the part is unknown,
// refuses it exactly as a newer one, to which it is gated: a release that adds a field to a
// command, a mutation kind or an enum value adds its gate here.
var wireGates = []wireGate{
	{ApplyVersionScheduleBounds, "orrery.v1.ScheduleDefinition", "start_at_unix_micros", ""},
	{ApplyVersionScheduleBounds, "orrery.v1.ScheduleDefinition", "end_at_unix_micros", ""},
	{ApplyVersionScheduleBounds, "orrery.v1.ScheduleDefinition", "max_occurrences", ""},
	{ApplyVersionPauseOnFailure, "orrery.v1.ScheduleDefinition", "pause_on_failure", ""},
	{ApplyVersionBufferAll, "orrery.v1.ScheduleDefinition", "overlap", "OVERLAP_POLICY_BUFFER_ALL"},
	{ApplyVersionCancelOther, "orrery.v1.ScheduleDefinition", "overlap", "OVERLAP_POLICY_CANCEL_OTHER"},
	{ApplyVersionJitter, "orrery.v1.ScheduleDefinition", "jitter_micros", ""},
	{ApplyVersionJitter, "orrery.v1.ScheduleDefinition", "jitter_allow_early", ""},
	{ApplyVersionExpiredStops, "orrery.v1.ScheduleDefinition", "expired", ""},
	{ApplyVersionExpiredStops, "orrery.v1.Mutation", "skip_expired", ""},
	{ApplyVersionBackfill, "orrery.v1.Mutation", "backfill_schedule", ""},
	{ApplyVersionLabels, "orrery.v1.ScheduleDefinition", "labels", ""},
	{ApplyVersionPace, "orrery.v1.ScheduleDefinition", "catch_up_pace", ""},
	{ApplyVersionSagaLabels, "orrery.v1.CompareExchangeSaga", "labels", ""},
	{ApplyVersionQueuePause, "orrery.v1.Mutation", "pause_queue", ""},
	{ApplyVersionQueuePause, "orrery.v1.Mutation", "resume_queue", ""},
	{ApplyVersionCancelMessage, "orrery.v1.Mutation", "cancel_message", ""},
	{ApplyVersionCalendars, "orrery.v1.Mutation", "put_calendar", ""},
	{ApplyVersionCalendars, "orrery.v1.Mutation", "delete_calendar", ""},
	{ApplyVersionCalendars, "orrery.v1.ScheduleDefinition", "calendars", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.Mutation", "set_queue_retry_policy", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.Enqueue", "retry", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.MessageTemplate", "retry", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.Release", "error", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.Release", "backoff", ""},
	{ApplyVersionRetryPolicies, "orrery.v1.Release", "retry", ""},
	{ApplyVersionPriority, "orrery.v1.Enqueue", "priority", ""},
	{ApplyVersionPriority, "orrery.v1.MessageTemplate", "priority", ""},
	{ApplyVersionPriority, "orrery.v1.PartitionLimits", "priority_step_micros", ""},
	{ApplyVersionUnique, "orrery.v1.Enqueue", "unique", ""},
	{ApplyVersionQueueShare, "orrery.v1.Mutation", "set_queue_share", ""},
}

// gateKey finds a gate: a field's presence (value -1) or one value of an enum field.
type gateKey struct {
	message protoreflect.FullName
	field   protoreflect.FieldNumber
	value   protoreflect.EnumNumber
}

// presence is gateKey.value for a gate on a field's presence.
const presence protoreflect.EnumNumber = -1

// gateVersions is wireGates by field number and enum value, resolved against the descriptors
// of this binary's wire (a gate that names no field or value of it panics at start).
var gateVersions = resolveGates(wireGates)

func resolveGates(gates []wireGate) map[gateKey]uint32 {
	out := map[gateKey]uint32{}
	for _, g := range gates {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(g.message)
		md, ok := d.(protoreflect.MessageDescriptor)
		if err != nil || !ok {
			panic(fmt.Sprintf("batch: wire gate on %s: not a message (%v)", g.message, err))
		}
		fd := md.Fields().ByName(g.field)
		if fd == nil {
			panic(fmt.Sprintf("batch: wire gate on %s: no field %s", g.message, g.field))
		}
		key := gateKey{message: g.message, field: fd.Number(), value: presence}
		if g.value != "" {
			if fd.Enum() == nil || fd.Enum().Values().ByName(g.value) == nil {
				panic(fmt.Sprintf("batch: wire gate on %s.%s: no value %s", g.message, g.field, g.value))
			}
			key.value = fd.Enum().Values().ByName(g.value).Number()
		}
		out[key] = g.version
	}
	return out
}

// wireViolation is the first part of a command's wire, in field-number order depth first, that
// its partition's apply version does not take.
type wireViolation struct {
	message protoreflect.FullName
	field   protoreflect.FieldNumber
	value   protoreflect.EnumNumber // presence when the field itself is refused
}

// error is the Validation error every replica answers a violation with, whatever it knows of
// the part: only what the wire itself says (the message, the field number, the value) and the
// partition's apply version.
func (w wireViolation) error(version uint32) *orrery.Error {
	what := fmt.Sprintf("field %d of %s", w.field, w.message)
	if w.value != presence {
		what = fmt.Sprintf("value %d of %s", w.value, what)
	}
	return orrery.Invalid("", "carries %s, which this partition does not take under apply version %d: every silo of its group must run a release that knows it, and the partition must raise its apply version (SetApplyVersion)", what, version)
}

// checkWire refuses a batch that carries, in its envelope or in a mutation, a field or an enum
// value that this binary does not know or that an apply version above a's introduced
// (wireGates): the whole command, before anything is written, with the first such part in
// field-number order depth first (the envelope's, then each mutation's in turn, named by its
// index only, since a replica that does not know a mutation's kind cannot name it).
//
// Protobuf decoding keeps the fields a binary does not know apart and takes enum values it
// does not know as numbers: without this, a replica of an older release would apply the
// command without them while a newer one refuses it, and their states would part. Refusing
// the whole command also keeps what it would store apart from how each binary encodes the
// parts (its request hash is of the batch as the binary re-encodes it, unknown fields last).
func (a Applier) checkWire(b *orreryv1.Batch) error {
	if err := wireError(b.ProtoReflect(), a.version()); err != nil {
		return err
	}
	return nil
}

// wireError is checkWire's error for a batch as any binary decoded it (this one's generated
// type, or a message of another release's descriptors in tests), nil when there is none.
func wireError(batch protoreflect.Message, version uint32) *orrery.Error {
	if !violates(batch, version) {
		return nil // the common case, found without ordering the fields
	}
	if w, found := firstViolation(batch, version, batchMutations); found {
		return w.error(version)
	}
	mutations := batch.Get(batch.Descriptor().Fields().ByNumber(batchMutations)).List()
	for i := range mutations.Len() {
		if w, found := firstViolation(mutations.Get(i).Message(), version, 0); found {
			return w.error(version).InField(fmt.Sprintf("mutations[%d]", i))
		}
	}
	return nil
}

// wireField is one field of a message as it came off the wire: known (fd set) or not.
type wireField struct {
	number protoreflect.FieldNumber
	fd     protoreflect.FieldDescriptor
	value  protoreflect.Value
}

// firstViolation walks msg's fields in field-number order, depth first, and returns the first
// that is unknown, gated above version, or an enum value unknown or gated above version. The
// field numbered skip at the top level is not walked (0: none).
func firstViolation(msg protoreflect.Message, version uint32, skip protoreflect.FieldNumber) (wireViolation, bool) {
	var fields []wireField
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != skip {
			fields = append(fields, wireField{number: fd.Number(), fd: fd, value: v})
		}
		return true
	})
	for raw := msg.GetUnknown(); len(raw) > 0; {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, raw[n:])
		if m < 0 {
			break
		}
		raw = raw[n+m:]
		if num != skip {
			fields = append(fields, wireField{number: num})
		}
	}
	slices.SortStableFunc(fields, func(x, y wireField) int { return cmp.Compare(x.number, y.number) })
	name := msg.Descriptor().FullName()
	for _, f := range fields {
		if f.fd == nil || gateVersions[gateKey{name, f.number, presence}] > version {
			return wireViolation{message: name, field: f.number, value: presence}, true
		}
		if w, found := valueViolation(name, f, version); found {
			return w, true
		}
	}
	return wireViolation{}, false
}

// valueViolation checks one known field's value: its enum values, its messages (walked),
// elements of a list in order, entries of a map in key order.
func valueViolation(message protoreflect.FullName, f wireField, version uint32) (wireViolation, bool) {
	check := func(v protoreflect.Value, kind protoreflect.Kind, enum protoreflect.EnumDescriptor) (wireViolation, bool) {
		switch kind {
		case protoreflect.EnumKind:
			n := v.Enum()
			if enum.Values().ByNumber(n) == nil || gateVersions[gateKey{message, f.number, n}] > version {
				return wireViolation{message: message, field: f.number, value: n}, true
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			return firstViolation(v.Message(), version, 0)
		}
		return wireViolation{}, false
	}
	fd := f.fd
	switch {
	case fd.IsList():
		list := f.value.List()
		for i := range list.Len() {
			if w, found := check(list.Get(i), fd.Kind(), fd.Enum()); found {
				return w, true
			}
		}
	case fd.IsMap():
		vd := fd.MapValue()
		if vd.Kind() != protoreflect.EnumKind && vd.Kind() != protoreflect.MessageKind {
			return wireViolation{}, false
		}
		var keys []protoreflect.MapKey
		f.value.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		slices.SortFunc(keys, func(x, y protoreflect.MapKey) int {
			return cmp.Compare(fmt.Sprint(x.Interface()), fmt.Sprint(y.Interface()))
		})
		for _, k := range keys {
			if w, found := check(f.value.Map().Get(k), vd.Kind(), vd.Enum()); found {
				return w, true
			}
		}
	default:
		return check(f.value, fd.Kind(), fd.Enum())
	}
	return wireViolation{}, false
}

// batchMutations is Batch.mutations' field number: checkWire walks a batch's envelope without
// its mutations, then each mutation.
var batchMutations = (&orreryv1.Batch{}).ProtoReflect().Descriptor().Fields().ByName("mutations").Number()

// violates reports whether msg carries, anywhere, a part firstViolation would refuse: the same
// test without putting the fields in order, for the commands that carry none.
func violates(msg protoreflect.Message, version uint32) bool {
	if len(msg.GetUnknown()) > 0 {
		return true
	}
	w := violationWalk{name: msg.Descriptor().FullName(), version: version}
	msg.Range(w.field)
	return w.found
}

// violationWalk is violates' walk of one message's fields (a method value, not a closure per
// field: violates runs on every command an apply admits).
type violationWalk struct {
	name    protoreflect.FullName
	version uint32
	found   bool
}

// field tests one set field of the message and reports whether to go on.
func (w *violationWalk) field(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	if gateVersions[gateKey{w.name, fd.Number(), presence}] > w.version {
		w.found = true
		return false
	}
	switch {
	case fd.IsList():
		list := v.List()
		for i := 0; i < list.Len() && !w.found; i++ {
			w.found = w.value(fd, list.Get(i), fd)
		}
	case fd.IsMap():
		if k := fd.MapValue().Kind(); k == protoreflect.EnumKind || k == protoreflect.MessageKind {
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				w.found = w.value(fd, mv, fd.MapValue())
				return !w.found
			})
		}
	default:
		w.found = w.value(fd, v, fd)
	}
	return !w.found
}

// value tests one value of field fd, described by vd (fd itself, or its map's value).
func (w *violationWalk) value(fd protoreflect.FieldDescriptor, v protoreflect.Value, vd protoreflect.FieldDescriptor) bool {
	switch vd.Kind() {
	case protoreflect.EnumKind:
		n := v.Enum()
		return vd.Enum().Values().ByNumber(n) == nil || gateVersions[gateKey{w.name, fd.Number(), n}] > w.version
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return violates(v.Message(), w.version)
	}
	return false
}
