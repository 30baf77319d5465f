package route

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

func TestPartitionIgnoresQueueAndIsStable(t *testing.T) {
	a := Partition(&orreryv1.Lane{Namespace: "acme", Queue: "q1", Key: "k"}, 32)
	b := Partition(&orreryv1.Lane{Namespace: "acme", Queue: "q2", Key: "k"}, 32)
	if a != b {
		t.Fatalf("queue changed the partition: %d vs %d", a, b)
	}
	// Pinned values: a change here re-partitions every existing data root.
	if got := PartitionOf("acme", "k", 32); got != a {
		t.Fatal("PartitionOf and Partition disagree")
	}
	for key, want := range map[string]int{"a": 2, "b": 10, "order-1": 28} {
		if got := PartitionOf("ns", key, 32); got != want {
			t.Errorf("PartitionOf(ns, %s, 32) = %d, pinned %d", key, got, want)
		}
	}
}

func TestJumpHashSpreadsAndMovesMinimally(t *testing.T) {
	counts := make([]int, 32)
	moved := 0
	for i := range 32000 {
		p := PartitionOf("ns", fmt.Sprint(i), 32)
		if p < 0 || p >= 32 {
			t.Fatalf("partition %d out of range", p)
		}
		counts[p]++
		if q := PartitionOf("ns", fmt.Sprint(i), 33); q != p && q != 32 {
			t.Fatalf("growing to 33 moved a key from %d to %d", p, q)
		} else if q != p {
			moved++
		}
	}
	for p, c := range counts {
		if c < 700 || c > 1300 {
			t.Fatalf("partition %d holds %d of 32000 keys", p, c)
		}
	}
	if moved < 600 || moved > 1400 {
		t.Fatalf("growing by one partition moved %d keys, want about 1/33", moved)
	}
}

// TestEveryMutationKindHasALane fails when a mutation kind is added to the wire contract
// without telling MutationLane where it lives.
func TestEveryMutationKindHasALane(t *testing.T) {
	partitionWide := map[string]bool{"receive": true, "housekeep": true, "check_consistency": true, "set_limits": true, "set_apply_version": true, "refresh_zone_rules": true, "put_grant": true, "delete_grant": true,
		"pause_queue": true, "resume_queue": true, "put_calendar": true, "delete_calendar": true, "set_queue_retry_policy": true,
		"set_queue_share": true}
	oneof := (&orreryv1.Mutation{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	lane := &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "k"}
	for i := range oneof.Fields().Len() {
		field := oneof.Fields().Get(i)
		m := &orreryv1.Mutation{}
		msg := m.ProtoReflect().Mutable(field).Message()
		// Set every Lane-typed field, and the lane inside a definition.
		fields := msg.Descriptor().Fields()
		for j := range fields.Len() {
			f := fields.Get(j)
			if f.Message() != nil && f.Message().FullName() == lane.ProtoReflect().Descriptor().FullName() {
				msg.Set(f, protoreflect.ValueOfMessage(lane.ProtoReflect()))
			}
			if f.Name() == "definition" {
				def := msg.Mutable(f).Message()
				def.Set(def.Descriptor().Fields().ByName("lane"), protoreflect.ValueOfMessage(lane.ProtoReflect()))
			}
		}
		got := MutationLane(m)
		if partitionWide[string(field.Name())] {
			if got != nil {
				t.Errorf("%s addresses a partition as a whole but MutationLane returned %v", field.Name(), got)
			}
			continue
		}
		if got == nil || got.GetKey() != "k" {
			t.Errorf("MutationLane(%s) = %v: add the kind to route.MutationLane", field.Name(), got)
		}
	}
}
