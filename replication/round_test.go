package replication

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
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
