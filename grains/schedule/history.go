package schedule

import (
	"bytes"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/retained"
)

// KeptGenerations is how many replaced generations a schedule keeps (Rules.KeepsGenerations):
// a replacement beyond them deletes the oldest.
const KeptGenerations = 10

// keepGeneration stores old, the record a replacement by principal at loggedNow replaces, as
// its generation's history entry, and deletes the entries beyond KeptGenerations.
func keepGeneration(v kv.View, lim input.Limits, old *orreryv1.ScheduleRecord, principal string, loggedNowMicros int64) error {
	lane, id := old.GetDefinition().GetLane(), old.GetDefinition().GetScheduleId()
	kept := &orreryv1.ScheduleGeneration{Record: old, ReplacedAtUnixMicros: loggedNowMicros, ReplacedBy: principal}
	if err := retained.Store(v, lim, keys.ScheduleHistoryKey(lane, id, old.GetGeneration()), kept); err != nil {
		return err
	}
	var beyond [][]byte
	n := 0
	err := kv.ScanPrefix(v, keys.ScheduleHistoryPrefix(lane, id), func(key, _ []byte) (bool, error) {
		if n++; n > KeptGenerations {
			beyond = append(beyond, bytes.Clone(key))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, key := range beyond {
		if err := retained.Delete(v, key); err != nil {
			return err
		}
	}
	return nil
}

// deleteGenerations removes every kept generation of the schedule.
func deleteGenerations(v kv.View, lane *orreryv1.Lane, id string) error {
	var all [][]byte
	err := kv.ScanPrefix(v, keys.ScheduleHistoryPrefix(lane, id), func(key, _ []byte) (bool, error) {
		all = append(all, bytes.Clone(key))
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, key := range all {
		if err := retained.Delete(v, key); err != nil {
			return err
		}
	}
	return nil
}

// Generations reads the schedule's kept generations, newest first (at most KeptGenerations
// and any a lowered bound has not deleted yet).
func Generations(r kv.Reader, lane *orreryv1.Lane, id string) ([]*orreryv1.ScheduleGeneration, error) {
	var out []*orreryv1.ScheduleGeneration
	err := kv.ScanPrefix(r, keys.ScheduleHistoryPrefix(lane, id), func(key, _ []byte) (bool, error) {
		g := &orreryv1.ScheduleGeneration{}
		if _, err := record.Load(r, bytes.Clone(key), g); err != nil {
			return false, err
		}
		out = append(out, g)
		return true, nil
	})
	return out, err
}
