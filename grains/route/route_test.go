package route

import (
	"fmt"
	"testing"

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
