package bench

import (
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/persistence"
)

// dueCommandOccurrences is what one due command to a partition with a backlog emits: 16
// schedules' EmitOccurrences of 32 each (batch.DueBatchOccurrences).
const dueCommandOccurrences = 16 * 32

// dueCommand is one due command to a partition with a backlog, recorded on the real apply path:
// the Raft entry's data the leader logs for it and every write its apply makes, in order.
type dueCommand struct {
	entry  []byte
	writes []recordedWrite
}

// recordedWrite is one write of an apply (value nil: a delete).
type recordedWrite struct{ key, value []byte }

// recordingView records the writes that reach a view.
type recordingView struct {
	kv.View
	writes []recordedWrite
}

func (v *recordingView) Set(key, value []byte) error {
	v.writes = append(v.writes, recordedWrite{key: append([]byte(nil), key...), value: append([]byte(nil), value...)})
	return v.View.Set(key, value)
}

func (v *recordingView) Delete(key []byte) error {
	v.writes = append(v.writes, recordedWrite{key: append([]byte(nil), key...)})
	return v.View.Delete(key)
}

// recordDueCommand configures 16 schedules with an hour of backlog on an in-memory partition,
// builds the due command a coordinator would send from its due index, and applies it,
// recording its entry and writes.
func recordDueCommand(b *testing.B) dueCommand {
	store := benchStore(b)
	a := batch.Applier{Limits: input.DefaultLimits()}
	now := time.Now()
	var configure []*orreryv1.Mutation
	for i := range 16 {
		configure = append(configure, &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
			Definition: &orreryv1.ScheduleDefinition{Lane: laneFor("throughput", 0, 32, i), ScheduleId: uuidFor(i), Spec: everySpec(time.Second, now.Add(-time.Hour)),
				Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`}}}}})
	}
	if _, err := a.ApplyBatch(store, "bench", &orreryv1.Batch{CommandId: "configure", Mutations: configure}, now.UnixMicro()); err != nil {
		b.Fatal(err)
	}
	res, err := due.ScanDue(store, now.UnixMicro()+1, due.Budget{MaxRefs: 256})
	if err != nil {
		b.Fatal(err)
	}
	dueBatch := &orreryv1.Batch{CommandId: "due-1-1", Mutations: due.Mutations(res.Refs, 32)}
	rec := &recordingView{View: store}
	receipt, err := a.ApplyDue(rec, input.CoordinatorPrincipal, dueBatch, now.UnixMicro()+1)
	if err != nil {
		b.Fatal(err)
	}
	occurrences := 0
	for _, r := range receipt.GetResults() {
		occurrences += len(r.GetSchedule().GetEnqueuedIds())
	}
	if occurrences != dueCommandOccurrences {
		b.Fatalf("the due command emitted %d occurrences, want %d", occurrences, dueCommandOccurrences)
	}
	command, err := proto.Marshal(&orreryv1.PartitionCommand{Batch: dueBatch, Due: true})
	if err != nil {
		b.Fatal(err)
	}
	entry, err := proto.Marshal(&orreryv1.PartitionEntry{LoggedTimeUnixMicros: now.UnixMicro(), Principal: input.CoordinatorPrincipal, Command: command})
	if err != nil {
		b.Fatal(err)
	}
	return dueCommand{entry: entry, writes: rec.writes}
}

// storeCeiling measures the silo store alone doing what a silo of 32 partitions does for
// their due commands, as fast as it can for d: each Raft round persists one due-command
// entry and a hard state per partition in one synced write, then every partition applies its
// batch's recorded writes with its applied mark (PartitionState.Apply), the partitions at the
// same time and while the next round persists, as the Raft driver pipelines them. The same
// keys are written again every round (at new versions, as Badger stores every write). It
// returns occurrences per second.
func storeCeiling(b *testing.B, cmd dueCommand, d time.Duration) float64 {
	const partitions = 32
	store, err := persistence.OpenSiloStore(persistence.SiloStoreDir(b.TempDir()), partitions, persistence.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	states := make([]*persistence.PartitionState, partitions)
	for n := range states {
		if states[n], err = store.Partition(n); err != nil {
			b.Fatal(err)
		}
	}
	var applying sync.WaitGroup
	var applyErr error
	var errMu sync.Mutex
	rounds := 0
	start := time.Now()
	for index := uint64(1); time.Since(start) < d; index++ {
		writes := make([]persistence.RaftWrite, partitions)
		for n := range writes {
			writes[n] = persistence.RaftWrite{Group: n,
				Entries:   []*raftpb.Entry{{Index: new(index), Term: new(uint64(1)), Data: cmd.entry}},
				HardState: &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(index)}}
		}
		if err := store.RaftLog().Persist(writes); err != nil {
			b.Fatal(err)
		}
		applying.Wait()
		if applyErr != nil {
			b.Fatal(applyErr)
		}
		mark := persistence.AppliedMark{Index: index, LoggedTimeMicros: int64(index)}
		for _, state := range states {
			applying.Go(func() {
				err := state.Apply(mark, func(txn *persistence.Txn) error {
					for _, w := range cmd.writes {
						var err error
						if w.value == nil {
							err = txn.Delete(w.key)
						} else {
							err = txn.Set(w.key, w.value)
						}
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errMu.Lock()
					applyErr = err
					errMu.Unlock()
				}
			})
		}
		rounds++
	}
	applying.Wait()
	return float64(rounds*partitions*dueCommandOccurrences) / time.Since(start).Seconds()
}
