// Package route owns which partition a lane belongs to: jump_hash(fnv64a(namespace + "\x00" +
// key), partitions). The queue name takes no part, so a schedule or saga and the queues of its
// namespace with the same key share a partition and change atomically together.
package route

import (
	"hash/fnv"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Partition returns the partition of a lane among partitions (which must be positive).
func Partition(lane *orreryv1.Lane, partitions int) int {
	return PartitionOf(lane.GetNamespace(), lane.GetKey(), partitions)
}

// PartitionOf returns the partition of (namespace, key) among partitions.
func PartitionOf(namespace, key string, partitions int) int {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return JumpHash(h.Sum64(), partitions)
}

// JumpHash is Lamping and Veach's jump consistent hash: buckets in [0, buckets).
func JumpHash(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// MutationLane returns the lane a mutation addresses (a schedule definition's lane for
// ConfigureSchedule), or nil for Receive, PauseQueue, ResumeQueue, Housekeep, CheckConsistency,
// SetLimits, SetApplyVersion, RefreshZoneRules, PutGrant, DeleteGrant, PutCalendar,
// DeleteCalendar, SetQueueRetryPolicy and SetQueueShare, which address their
// partition as a whole.
func MutationLane(m *orreryv1.Mutation) *orreryv1.Lane {
	switch k := m.GetKind().(type) {
	case *orreryv1.Mutation_ConfigureSchedule:
		return k.ConfigureSchedule.GetDefinition().GetLane()
	case *orreryv1.Mutation_EmitOccurrences:
		return k.EmitOccurrences.GetLane()
	case *orreryv1.Mutation_CancelSchedule:
		return k.CancelSchedule.GetLane()
	case *orreryv1.Mutation_DeleteSchedule:
		return k.DeleteSchedule.GetLane()
	case *orreryv1.Mutation_PauseSchedule:
		return k.PauseSchedule.GetLane()
	case *orreryv1.Mutation_ResumeSchedule:
		return k.ResumeSchedule.GetLane()
	case *orreryv1.Mutation_TriggerSchedule:
		return k.TriggerSchedule.GetLane()
	case *orreryv1.Mutation_SkipExpired:
		return k.SkipExpired.GetLane()
	case *orreryv1.Mutation_BackfillSchedule:
		return k.BackfillSchedule.GetLane()
	case *orreryv1.Mutation_CancelMessage:
		return k.CancelMessage.GetLane()
	case *orreryv1.Mutation_CompareExchangeSaga:
		return k.CompareExchangeSaga.GetLane()
	case *orreryv1.Mutation_ExpireSaga:
		return k.ExpireSaga.GetLane()
	case *orreryv1.Mutation_Enqueue:
		return k.Enqueue.GetLane()
	case *orreryv1.Mutation_Ack:
		return k.Ack.GetLane()
	case *orreryv1.Mutation_Release:
		return k.Release.GetLane()
	case *orreryv1.Mutation_ExtendLease:
		return k.ExtendLease.GetLane()
	case *orreryv1.Mutation_RedriveDeadLetters:
		return k.RedriveDeadLetters.GetLane()
	default:
		return nil
	}
}
