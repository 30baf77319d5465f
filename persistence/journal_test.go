package persistence

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// journalBatch commits one batch the way the partition grain does: logged time, applied
// index and journal record in one transaction with the batch's effects.
func journalBatch(t *testing.T, s *Store, index uint64, principal string) *orreryv1.JournalRecord {
	t.Helper()
	rec := &orreryv1.JournalRecord{
		AppliedIndex:         index,
		LoggedTimeUnixMicros: NextLoggedTime(s.LoggedTime(), 1_000_000),
		Entries:              []*orreryv1.JournalEntry{{Principal: principal}},
	}
	update(t, s, func(txn *Txn) error {
		if err := txn.Set(fmt.Appendf(nil, "state/%d", index), []byte(principal)); err != nil {
			return err
		}
		if err := txn.SetLoggedTime(rec.GetLoggedTimeUnixMicros()); err != nil {
			return err
		}
		if err := txn.SetAppliedIndex(index); err != nil {
			return err
		}
		return txn.AppendJournal(rec)
	})
	return rec
}

func readJournal(t *testing.T, s *Store, from uint64) []*orreryv1.JournalRecord {
	t.Helper()
	var got []*orreryv1.JournalRecord
	if err := s.ScanJournal(from, func(rec *orreryv1.JournalRecord) (bool, error) {
		got = append(got, rec)
		return true, nil
	}); err != nil {
		t.Fatalf("ScanJournal: %v", err)
	}
	return got
}

func TestJournalReadsBackInOrderAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	var want []*orreryv1.JournalRecord
	// Indexes 250..259: they cross a byte boundary, so the order must be numeric, not textual.
	for index := uint64(250); index < 260; index++ {
		want = append(want, journalBatch(t, s, index, fmt.Sprintf("p%d", index)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, quietOptions())
	want = append(want, journalBatch(t, s, 260, "after reopen"))

	got := readJournal(t, s, 0)
	if len(got) != len(want) {
		t.Fatalf("journal holds %d records, want %d", len(got), len(want))
	}
	for i, rec := range got {
		stamped := proto.CloneOf(want[i])
		stamped.ActivationEpoch = 1
		if i == len(got)-1 {
			stamped.ActivationEpoch = 2
		}
		if !proto.Equal(rec, stamped) {
			t.Fatalf("journal[%d] = %v, want %v", i, rec, stamped)
		}
	}
	if from := readJournal(t, s, 258); len(from) != 3 || from[0].GetAppliedIndex() != 258 {
		t.Errorf("ScanJournal(258) = %d records starting at %d", len(from), from[0].GetAppliedIndex())
	}
	if s.AppliedIndex() != 260 {
		t.Errorf("applied index %d, want 260", s.AppliedIndex())
	}
}

func TestTrimJournalIsBounded(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	for index := uint64(1); index <= 10; index++ {
		journalBatch(t, s, index, fmt.Sprint(index))
	}
	var deleted int
	update(t, s, func(txn *Txn) (err error) {
		deleted, err = txn.TrimJournal(8, 4)
		return err
	})
	if deleted != 4 {
		t.Errorf("first trim deleted %d, want 4", deleted)
	}
	update(t, s, func(txn *Txn) (err error) {
		deleted, err = txn.TrimJournal(8, 100)
		return err
	})
	if deleted != 3 {
		t.Errorf("second trim deleted %d, want 3 (indexes 5..7)", deleted)
	}
	got := readJournal(t, s, 0)
	if len(got) != 3 || got[0].GetAppliedIndex() != 8 {
		t.Fatalf("after trimming below 8: %d records starting at %d", len(got), got[0].GetAppliedIndex())
	}
	if len(viewAll(t, s)) != 10 {
		t.Error("trimming the journal touched state keys")
	}
}

// TestTrimJournalStartsAtItsFloor pins that a trim walks from the floor the last committed
// trim left, not from the front of the journal (where every deleted record would be stepped
// over again): a record planted below the floor is not found, and a trim whose batch is not
// committed does not move the floor.
func TestTrimJournalStartsAtItsFloor(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	for index := uint64(1); index <= 12; index++ {
		journalBatch(t, s, index, fmt.Sprint(index))
	}
	trim := func(below uint64, most int) int {
		var deleted int
		update(t, s, func(txn *Txn) (err error) {
			deleted, err = txn.TrimJournal(below, most)
			return err
		})
		return deleted
	}
	if got := trim(10, 4); got != 4 {
		t.Fatalf("first trim deleted %d, want 4 (indexes 1..4)", got)
	}
	// A trim that is not committed leaves the floor where it was.
	refused := errors.New("not this batch")
	if err := s.Update(func(txn *Txn) error {
		if n, err := txn.TrimJournal(10, 100); err != nil || n != 5 {
			t.Errorf("uncommitted trim deleted %d (%v), want 5", n, err)
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("Update = %v", err)
	}
	update(t, s, func(txn *Txn) error { return txn.set(JournalKey(2), []byte("planted below the floor")) })
	if got := trim(10, 100); got != 5 {
		t.Errorf("second trim deleted %d, want 5 (indexes 5..9; index 2 is below the floor)", got)
	}
	if got := trim(10, 100); got != 0 {
		t.Errorf("third trim deleted %d, want 0", got)
	}
	got := readJournal(t, s, 3)
	if len(got) != 3 || got[0].GetAppliedIndex() != 10 {
		t.Fatalf("after trimming below 10: %d records from index 3 on, starting at %d", len(got), got[0].GetAppliedIndex())
	}
}

func TestAppendJournalRefusesInconsistentRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t, t.TempDir(), quietOptions())
	journalBatch(t, s, 1, "first")
	for name, fn := range map[string]func(txn *Txn) error{
		"index already committed": func(txn *Txn) error {
			return txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: 1})
		},
		"index differs from the batch's": func(txn *Txn) error {
			if err := txn.SetAppliedIndex(2); err != nil {
				return err
			}
			return txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: 3})
		},
		"another epoch": func(txn *Txn) error {
			return txn.AppendJournal(&orreryv1.JournalRecord{AppliedIndex: 2, ActivationEpoch: 7})
		},
	} {
		if err := s.Update(fn); !errors.Is(err, orrery.ErrInternal) {
			t.Errorf("%s: %v, want Internal", name, err)
		}
	}
	if n := len(readJournal(t, s, 0)); n != 1 {
		t.Errorf("journal holds %d records after refused appends, want 1", n)
	}
}
