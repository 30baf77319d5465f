package replication

import (
	"reflect"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/orreryhq/orrery/persistence"
)

// A pending proposal is settled by the entry that commits at its index: committed when the
// terms match, lost when another leader's entry took the index (Log Matching: index and term
// identify an entry).
func TestCommittedEntriesSettlePendingProposalsByIndexAndTerm(t *testing.T) {
	gr := &group{id: 7, pending: []Proposal{{Group: 7, Index: 4, Term: 2}, {Group: 7, Index: 5, Term: 2}}}
	var outcomes []Outcome
	c, err := gr.committed([]*raftpb.Entry{
		{Index: new(uint64(4)), Term: new(uint64(2))},
		{Index: new(uint64(5)), Term: new(uint64(3))},
	}, &outcomes)
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{{Proposal: Proposal{Group: 7, Index: 4, Term: 2}, Committed: true}, {Proposal: Proposal{Group: 7, Index: 5, Term: 2}}}
	if len(outcomes) != 2 || outcomes[0] != want[0] || outcomes[1] != want[1] {
		t.Fatalf("outcomes %+v, want %+v", outcomes, want)
	}
	if c.AppliedIndex != 5 || len(c.Entries) != 0 || len(gr.pending) != 0 {
		t.Fatalf("committed %+v, pending %+v", c, gr.pending)
	}
}

// splitDurable keeps what a previous round persisted apart from what this round's Writes
// append, per group and in log order.
func TestSplitDurableCutsEachGroupAtItsFirstAppendedEntry(t *testing.T) {
	entries := func(indexes ...uint64) []Entry {
		var out []Entry
		for _, i := range indexes {
			out = append(out, Entry{Index: i})
		}
		return out
	}
	appends := func(group int, from uint64) persistence.RaftWrite {
		return persistence.RaftWrite{Group: group, Entries: []*raftpb.Entry{{Index: new(from)}, {Index: new(from + 1)}}}
	}
	round := &Round{
		Writes: []persistence.RaftWrite{appends(1, 10), appends(2, 20), appends(3, 30), {Group: 4}},
		Committed: []Committed{
			{Group: 0, Entries: entries(3, 4), AppliedIndex: 5},      // nothing appended: durable
			{Group: 1, Entries: entries(8, 9, 10), AppliedIndex: 10}, // cut at 10
			{Group: 2, Entries: entries(20), AppliedIndex: 21},       // all appended
			{Group: 3, Entries: entries(28), AppliedIndex: 30},       // Raft's own entry at 30 is appended
			{Group: 4, Entries: entries(40), AppliedIndex: 40},       // a hard state only: durable
		},
	}
	durable, appended := round.splitDurable()
	wantDurable := []Committed{
		{Group: 0, Entries: entries(3, 4), AppliedIndex: 5},
		{Group: 1, Entries: entries(8, 9), AppliedIndex: 9},
		{Group: 4, Entries: entries(40), AppliedIndex: 40},
	}
	wantAppended := []Committed{
		{Group: 1, Entries: entries(10), AppliedIndex: 10},
		{Group: 2, Entries: entries(20), AppliedIndex: 21},
		{Group: 3, Entries: entries(28), AppliedIndex: 30},
	}
	if !reflect.DeepEqual(durable, wantDurable) || !reflect.DeepEqual(appended, wantAppended) {
		t.Fatalf("durable %+v, appended %+v; want %+v, %+v", durable, appended, wantDurable, wantAppended)
	}
}
