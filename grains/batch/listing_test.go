package batch

import (
	"bytes"
	"fmt"

	"pgregory.net/rapid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/listing"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// listed is one record as a list names it: queue, key, id, and its state or phase.
type listed struct {
	queue, key, id string
	state          int32
}

// recordsOf filters the stored records (prefix keys.Schedule or keys.Saga) the brute-force
// way: every record, decoded, kept when its namespace, queue and state match (0: any).
func recordsOf(t *rapid.T, v kv.Reader, prefix []byte, namespace, queue string, state int32) []listed {
	var out []listed
	err := kv.ScanPrefix(v, prefix, func(_, value []byte) (bool, error) {
		var l listed
		var lane *orreryv1.Lane
		if bytes.Equal(prefix, keys.Schedule) {
			rec, err := schedule.Decode(value)
			if err != nil {
				return false, err
			}
			lane, l.id, l.state = rec.GetDefinition().GetLane(), rec.GetDefinition().GetScheduleId(), int32(schedule.StateOf(rec))
		} else {
			rec := &orreryv1.SagaRecord{}
			if err := record.Unmarshal(value, rec); err != nil {
				return false, err
			}
			lane, l.id, l.state = rec.GetLane(), rec.GetSagaId(), int32(rec.GetPhase())
		}
		l.queue, l.key = lane.GetQueue(), lane.GetKey()
		if lane.GetNamespace() == namespace && (queue == "" || queue == l.queue) && (state == 0 || state == l.state) {
			out = append(out, l)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("scan records: %v", err)
	}
	return out
}

// listAll reads a list to its end, pageSize records a page, failing on a continuation that
// does not move forward.
func listAll(t *rapid.T, v kv.Reader, sagas bool, namespace, queue string, state int32, pageSize uint32) []listed {
	var out []listed
	var after []byte
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("list %s/%s state %d: more than 100 pages", namespace, queue, state)
		}
		var next []byte
		if sagas {
			page, n, err := listing.Sagas(v, &orreryv1.ListSagas{Namespace: namespace, Queue: queue, Phase: orreryv1.SagaPhase(state), After: after, MaxRecords: pageSize}, listing.MaxPageBytes)
			if err != nil {
				t.Fatalf("list sagas: %v", err)
			}
			for _, rec := range page {
				out = append(out, listed{rec.GetLane().GetQueue(), rec.GetLane().GetKey(), rec.GetSagaId(), int32(rec.GetPhase())})
			}
			next = n
		} else {
			page, n, err := listing.Schedules(v, &orreryv1.ListSchedules{Namespace: namespace, Queue: queue, State: orreryv1.ScheduleState(state), After: after, MaxRecords: pageSize}, listing.MaxPageBytes)
			if err != nil {
				t.Fatalf("list schedules: %v", err)
			}
			for _, item := range page {
				def := item.GetRecord().GetDefinition()
				if item.GetState() != schedule.StateOf(item.GetRecord()) {
					t.Fatalf("schedule %s listed %v, its record is %v", def.GetScheduleId(), item.GetState(), schedule.StateOf(item.GetRecord()))
				}
				out = append(out, listed{def.GetLane().GetQueue(), def.GetLane().GetKey(), def.GetScheduleId(), int32(item.GetState())})
			}
			next = n
		}
		if len(next) == 0 {
			return out
		}
		if bytes.Equal(next, after) {
			t.Fatalf("list %s/%s state %d: continuation %x does not move", namespace, queue, state, next)
		}
		after = next
	}
}

// checkListing: for every filter of the model's namespace, listing page by page returns
// exactly the records the brute-force filter keeps, in the same order (key order); and the
// indexes hold one entry per record, no stale one.
func checkListing(t *rapid.T, v kv.Reader) {
	pageSize := uint32(rapid.IntRange(1, 3).Draw(t, "pageSize"))
	for _, sagas := range []bool{false, true} {
		prefix, index, states := keys.Schedule, keys.ScheduleIndex, orreryv1.ScheduleState_name
		if sagas {
			prefix, index, states = keys.Saga, keys.SagaIndex, orreryv1.SagaPhase_name
		}
		for _, queue := range []string{"", "jobs", "reports", "other"} {
			for state := range states {
				want := recordsOf(t, v, prefix, "acme", queue, state)
				got := listAll(t, v, sagas, "acme", queue, state, pageSize)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("list (sagas %v) queue %q state %d, pages of %d: got %v, records say %v", sagas, queue, state, pageSize, got, want)
				}
			}
		}
		if entries, records := count(t, v, index), count(t, v, prefix); entries != records {
			t.Fatalf("%s holds %d index entries for %d records in %s", index, entries, records, prefix)
		}
	}
}

func count(t *rapid.T, v kv.Reader, prefix []byte) int {
	n := 0
	if err := kv.ScanPrefix(v, prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
