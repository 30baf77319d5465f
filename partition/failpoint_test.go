package partition

import (
	"testing"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/replication"
)

// entryOf is a replication entry whose command is a batch of mutations (a due command when
// due is set).
func entryOf(t *testing.T, due bool, mutations ...*orreryv1.Mutation) replication.Entry {
	t.Helper()
	data, err := proto.Marshal(&orreryv1.PartitionCommand{Due: due, Batch: &orreryv1.Batch{CommandId: "c", Mutations: mutations}})
	if err != nil {
		t.Fatal(err)
	}
	return replication.Entry{Index: 1, Term: 1, PartitionEntry: &orreryv1.PartitionEntry{Command: data}}
}

// TestKindFailpointsIgnoreOtherKinds: a failpoint narrowed to a kind of command counts only
// the hits of its boundary for a round holding an entry of that kind, and ignores every other
// hit: other commands, the other kind, the other boundary, kind-blind hits.
func TestKindFailpointsIgnoreOtherKinds(t *testing.T) {
	emit := &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{}}}
	expire := &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{}}}
	plain := entryOf(t, false, enqueue("m1"))
	dueEmit := entryOf(t, true, emit)
	dueExpire := entryOf(t, true, expire)
	for _, tc := range []struct {
		spec string
		hit  replication.Entry // the one entry kind the failpoint counts
	}{
		{"due-entry-applied", dueEmit},
		{"expire-entry-applied", dueExpire},
		{"due-entry-committed", dueEmit},
		{"expire-entry-committed", dueExpire},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			fired := 0
			fp, err := NewFailpoints(tc.spec, func(string) { fired++ })
			if err != nil {
				t.Fatal(err)
			}
			if name, at := fp.Armed(); name != tc.spec || at != 1 {
				t.Fatalf("Armed() = %q, %d; want %q, 1", name, at, tc.spec)
			}
			boundary, other := FailpointEntryApplied, FailpointEntryCommitted
			if fp.name == FailpointEntryCommitted {
				boundary, other = other, boundary
			}
			otherKind := dueExpire
			if tc.hit.PartitionEntry == dueExpire.PartitionEntry {
				otherKind = dueEmit
			}
			fp.Hit(boundary)
			fp.HitEntries(boundary, []replication.Entry{plain})
			fp.HitEntries(boundary, []replication.Entry{plain, otherKind})
			fp.HitEntries(other, []replication.Entry{tc.hit})
			fp.HitEntries(FailpointEntryAppended, []replication.Entry{tc.hit})
			if fired != 0 {
				t.Fatalf("fired %d times at hits of other kinds or boundaries", fired)
			}
			fp.HitEntries(boundary, []replication.Entry{plain, tc.hit})
			if fired != 1 {
				t.Fatalf("fired %d times at the first hit of its kind, want once", fired)
			}
		})
	}
	// An EmitOccurrences outside a due command is not the due coordinator's emission.
	fired := 0
	fp, err := NewFailpoints("due-entry-applied", func(string) { fired++ })
	if err != nil {
		t.Fatal(err)
	}
	fp.HitEntries(FailpointEntryApplied, []replication.Entry{entryOf(t, false, emit)})
	if fired != 0 {
		t.Fatal("a due-entry-applied failpoint fired for an EmitOccurrences outside a due command")
	}
	for _, spec := range []string{"due-entry-appended", "expire-reply-sent", "due-", "other-entry-applied"} {
		if _, err := NewFailpoints(spec, func(string) {}); err == nil {
			t.Errorf("NewFailpoints(%q) was accepted", spec)
		}
	}
}
