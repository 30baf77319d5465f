package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/partition"
	"github.com/orreryhq/orrery/persistence"
	"github.com/orreryhq/orrery/silo"
)

// BenchmarkLatenessFloor: the CPU the partition stores alone spend on the writes of
// BenchmarkDueLateness's load, with no state machine, actor, client or worker running. One
// persistence.Store per partition (the silo's default count and options) applies a group every
// partition.DefaultBusyApplyGap and syncs every partition.DefaultBusySyncGap, the pacing a busy
// silo uses (a partition with nothing to write skips its group); each group holds the writes of
// the occurrences that fell due since the previous one, and, with the worker, of receiving the
// previous group's occurrences and acking the ones received before. What one occurrence writes
// is recorded from the state machines themselves (batch.Applier on a kv.Memory: emitted by the
// partition's own due batch, received, acked); inbox entries and partition-wide counters are
// written once per group and phase. Retention (ledger, receipts, journal) is left out, so
// cpu-cores is a lower bound of what storage costs the silo at that load, to set against
// DueLateness's own cpu-cores. groups/s falls below partitions / DefaultBusyApplyGap when
// groups take longer than the gap. ORRERY_BENCH_LATENESS_SCHEDULES and
// ORRERY_BENCH_LATENESS_WORKER (off) set the load as for DueLateness.
func BenchmarkLatenessFloor(b *testing.B) {
	schedules := scale(10_000, 1_000)
	if n, err := strconv.Atoi(os.Getenv("ORRERY_BENCH_LATENESS_SCHEDULES")); err == nil && n > 0 {
		schedules = n
	}
	consume := os.Getenv("ORRERY_BENCH_LATENESS_WORKER") != "off"
	warmup, window := 2*time.Second, time.Duration(scale(15, 2))*time.Second
	life := recordOccurrence(b)
	for range b.N {
		dir := b.TempDir()
		stores := make([]*persistence.Store, silo.DefaultPartitions)
		for n := range stores {
			s, err := persistence.Open(filepath.Join(dir, strconv.Itoa(n)), persistence.Options{FlushStagger: n})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			stores[n] = s
		}
		start := time.Now()
		stop := start.Add(warmup + window + time.Second)
		var groups, written atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, len(stores))
		for n, s := range stores {
			perSecond := schedules / len(stores)
			if n < schedules%len(stores) {
				perSecond++
			}
			wg.Go(func() {
				if err := life.drive(s, start, stop, perSecond, consume, &groups, &written); err != nil {
					errs <- fmt.Errorf("partition %d: %w", n, err)
				}
			})
		}
		time.Sleep(warmup)
		cpuFrom, groupsFrom, writtenFrom := cpuSeconds(), groups.Load(), written.Load()
		time.Sleep(window)
		cores := (cpuSeconds() - cpuFrom) / window.Seconds()
		groupCount, writtenCount := groups.Load()-groupsFrom, written.Load()-writtenFrom
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(cores, "cpu-cores")
		b.ReportMetric(float64(groupCount)/window.Seconds(), "groups/s")
		b.ReportMetric(float64(writtenCount)/window.Seconds(), "occurrences/s")
	}
}

// floorWrite is one store write of an occurrence's life, as a state machine made it.
type floorWrite struct {
	key   []byte
	value int // value length; -1 for a delete
}

// floorPhase is what one phase of an occurrence's life writes: per occurrence, and once per
// group (inbox entry, receipt expiry, partition-wide counters), with the mutation the journal
// records for it.
type floorPhase struct {
	perOccurrence, perGroup []floorWrite
	mutation                *orreryv1.Mutation
	principal               string
}

// floorLife is the three phases of one occurrence: emit, receive, ack.
type floorLife struct{ emit, receive, ack floorPhase }

// recordingView records every write a state machine makes through it.
type recordingView struct {
	kv.View
	writes []floorWrite
}

func (v *recordingView) Set(key, value []byte) error {
	v.writes = append(v.writes, floorWrite{key: bytes.Clone(key), value: len(value)})
	return v.View.Set(key, value)
}

func (v *recordingView) Delete(key []byte) error {
	v.writes = append(v.writes, floorWrite{key: bytes.Clone(key), value: -1})
	return v.View.Delete(key)
}

// recordOccurrence runs one schedule shaped like DueLateness's through the state machines and
// records what its first occurrence's emit, receive and ack write.
func recordOccurrence(b *testing.B) *floorLife {
	b.Helper()
	a := batch.Applier{Limits: input.DefaultLimits()}
	mem := kv.NewMemory()
	lane := laneFor("lateness", 0, silo.DefaultPartitions, 0)
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	configure := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: uuidFor(0), Spec: everySpec(time.Second, first),
			Template: &orreryv1.MessageTemplate{PayloadJson: `{"bench":true}`}}}}}
	now := first.UnixMicro()
	apply := func(principal, id string, m *orreryv1.Mutation) (floorPhase, *orreryv1.MutationResult) {
		now += 1000
		v := &recordingView{View: mem}
		req := &orreryv1.Batch{CommandId: id, Mutations: []*orreryv1.Mutation{m}}
		var rc *orreryv1.Receipt
		if principal == partition.OwnDuePrincipal {
			r, err := a.ApplyOwn(v, principal, req, now)
			if err != nil {
				b.Fatalf("%s: %v", id, err)
			}
			rc = r
		} else {
			out, err := a.ApplyBatch(v, principal, req, now)
			if err != nil {
				b.Fatalf("%s: %v", id, err)
			}
			rc = out.Receipt
		}
		if len(rc.GetResults()) != 1 || rc.GetResults()[0].GetError() != nil {
			b.Fatalf("%s: receipt %v", id, rc)
		}
		p := floorPhase{mutation: m, principal: principal}
		for _, w := range v.writes {
			if bytes.HasPrefix(w.key, keys.Inbox) || bytes.HasPrefix(w.key, keys.InboxExpiry) || bytes.HasPrefix(w.key, []byte("meta/")) {
				p.perGroup = append(p.perGroup, w)
			} else {
				p.perOccurrence = append(p.perOccurrence, w)
			}
		}
		return p, rc.GetResults()[0]
	}
	apply("bench", "configure", configure)
	var life floorLife
	life.emit, _ = apply(partition.OwnDuePrincipal, "due-1", &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{
		Lane: lane, ScheduleId: uuidFor(0), ExpectedGeneration: 1, Max: 32}}})
	var res *orreryv1.MutationResult
	life.receive, res = apply("bench", "receive", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{
		Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1, LeaseDurationMicros: 30 * input.Second, Owner: "bench"}}})
	msgs := res.GetReceive().GetMessages()
	if len(msgs) != 1 {
		b.Fatalf("received %d messages, want the occurrence", len(msgs))
	}
	life.ack, _ = apply("bench", "ack", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{
		Lane: lane, Id: msgs[0].GetId(), LeaseToken: msgs[0].GetLease().GetToken()}}})
	if len(life.emit.perOccurrence) == 0 || len(life.receive.perOccurrence) == 0 || len(life.ack.perOccurrence) == 0 {
		b.Fatalf("recorded no writes: %+v", life)
	}
	return &life
}

// drive applies s's groups from start until stop: occurrences fall due at perSecond, spread
// evenly, and each group writes those due since the previous one (and, when consume is set,
// receives the previous group's and acks the ones received before). A second goroutine syncs
// the store every partition.DefaultBusySyncGap.
func (l *floorLife) drive(s *persistence.Store, start, stop time.Time, perSecond int, consume bool, groups, written *atomic.Int64) error {
	syncDone, syncErr := make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(partition.DefaultBusySyncGap)
		defer t.Stop()
		for {
			select {
			case <-syncDone:
				syncErr <- s.Sync()
				return
			case <-t.C:
				if err := s.Sync(); err != nil {
					syncErr <- err
					return
				}
			}
		}
	}()
	values := make([]byte, 64<<10)
	var emitted, received, acked, group uint64
	loggedTime := int64(0)
	err := func() error {
		for now := time.Now(); now.Before(stop); now = time.Now() {
			dueNow := uint64(now.Sub(start).Seconds() * float64(perSecond)) // monotonic: never below emitted
			receiveTo, ackTo := emitted, received
			if !consume {
				receiveTo, ackTo = received, acked
			}
			if dueNow == emitted && receiveTo == received && ackTo == acked { // nothing to write
				time.Sleep(time.Until(now.Add(partition.DefaultBusyApplyGap)))
				continue
			}
			group++
			err := s.Apply(func(txn *persistence.Txn) error {
				var entries []*orreryv1.JournalEntry
				phase := func(p *floorPhase, from, to uint64) error {
					if from == to {
						return nil
					}
					var muts []*orreryv1.Mutation
					for k := from; k < to; k++ {
						for _, w := range p.perOccurrence {
							if err := floorWriteAt(txn, w, values, k); err != nil {
								return err
							}
						}
						if p.mutation.GetReceive() == nil || k == from { // one receive takes them all
							muts = append(muts, p.mutation)
						}
					}
					for _, w := range p.perGroup {
						if err := floorWriteAt(txn, w, values, group); err != nil {
							return err
						}
					}
					entries = append(entries, &orreryv1.JournalEntry{Principal: p.principal, Batch: &orreryv1.Batch{
						CommandId: fmt.Sprintf("floor-%d", group), Mutations: muts}})
					return nil
				}
				if err := phase(&l.emit, emitted, dueNow); err != nil {
					return err
				}
				if err := phase(&l.receive, received, receiveTo); err != nil {
					return err
				}
				if err := phase(&l.ack, acked, ackTo); err != nil {
					return err
				}
				loggedTime = persistence.NextLoggedTime(loggedTime, time.Now().UnixMicro())
				index := s.AppliedIndex() + 1
				if err := txn.SetLoggedTime(loggedTime); err != nil {
					return err
				}
				if err := txn.SetAppliedIndex(index); err != nil {
					return err
				}
				return txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: index, LoggedTimeUnixMicros: loggedTime, Entries: entries})
			})
			if err != nil {
				return err
			}
			groups.Add(1)
			written.Add(int64(dueNow - emitted))
			emitted, received, acked = dueNow, receiveTo, ackTo
			time.Sleep(time.Until(now.Add(partition.DefaultBusyApplyGap)))
		}
		return nil
	}()
	close(syncDone)
	if serr := <-syncErr; err == nil {
		err = serr
	}
	return err
}

// floorWriteAt applies w for occurrence (or group) k: the recorded key made unique to k, and a value
// of the recorded length.
func floorWriteAt(txn *persistence.Txn, w floorWrite, values []byte, k uint64) error {
	key := binary.BigEndian.AppendUint64(bytes.Clone(w.key), k)
	if w.value < 0 {
		return txn.Delete(key)
	}
	return txn.Set(key, values[:w.value])
}
