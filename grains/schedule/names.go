package schedule

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// maxIncarnation bounds the incarnations ResolveName considers: a name deleted this many
// times in one lane is refused (it takes 2^32 deletions, so never in practice, and keeps the
// search at 64 reads at most).
const maxIncarnation = 1 << 32

// NameResolution is the identity a schedule's name addresses in a lane now (ResolveName).
type NameResolution struct {
	// Incarnation is which schedule of the name it is: 1 for the name's first, n+1 for the
	// one created after the n-th was deleted.
	Incarnation uint64
	// ScheduleID is its id, input.ScheduleIDFromNameIncarnation(namespace, name, Incarnation).
	ScheduleID string
}

// ResolveName resolves a schedule's name in lane to its current identity: the first of its
// incarnations (input.ScheduleIDFromNameIncarnation) whose id is not a deleted schedule's. That
// id is the schedule of the name when one lives there, and otherwise the id the next creation
// of the name takes; a deleted id stays terminal (ApplyConfigure refuses it), so its name moves
// on to the next incarnation and is never burnt.
//
// It reads only the tombstones (keys.ScheduleTombstoneKey) and writes nothing: no index is
// kept, so ApplyConfigure and ApplyDelete write exactly what they did before names were
// reusable, and replicas of either version apply every entry alike. A client takes incarnation
// n only once the ids before it are deleted, so the deleted incarnations of a name are a
// prefix 1..n-1: the search doubles to a live or free incarnation and then bisects, at most
// 2·log2(n)+2 reads. An id of a later incarnation configured by hand out of that order makes
// the search return some incarnation that is not deleted, never a deleted one.
//
// The name must be a valid schedule name (Validation on field, as ScheduleDefinition.name).
func ResolveName(r kv.Reader, lane *orreryv1.Lane, field, name string) (NameResolution, error) {
	if err := input.Lane("lane", lane, false); err != nil {
		return NameResolution{}, err
	}
	if err := input.Name(field, name, input.MaxScheduleNameBytes); err != nil {
		return NameResolution{}, err
	}
	id := func(incarnation uint64) string {
		return input.ScheduleIDFromNameIncarnation(lane.GetNamespace(), name, incarnation)
	}
	deleted := func(incarnation uint64) (bool, error) { return Deleted(r, lane, id(incarnation)) }
	// lo is deleted, hi is not: the answer is in (lo, hi].
	lo, hi := uint64(0), uint64(1)
	for {
		gone, err := deleted(hi)
		if err != nil {
			return NameResolution{}, err
		}
		if !gone {
			break
		}
		if hi >= maxIncarnation {
			return NameResolution{}, orrery.FieldErrorf(orrery.CodeQuotaExceeded, field, "the schedules of name %q in this lane were deleted %d times; give the schedule another name", name, hi)
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		gone, err := deleted(mid)
		if err != nil {
			return NameResolution{}, err
		}
		if gone {
			lo = mid
		} else {
			hi = mid
		}
	}
	return NameResolution{Incarnation: hi, ScheduleID: id(hi)}, nil
}

// Deleted reports whether the schedule id of lane was deleted: its tombstone exists, and it can
// never be configured again.
func Deleted(r kv.Reader, lane *orreryv1.Lane, scheduleID string) (bool, error) {
	_, found, err := r.Get(keys.ScheduleTombstoneKey(lane, scheduleID))
	return found, err
}
