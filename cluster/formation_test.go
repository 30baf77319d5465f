package cluster

import (
	"strings"
	"testing"
)

// TestFormationRule is the cluster-identity rule as a table: what a node does given what it
// knows and the live peers it sees.
func TestFormationRule(t *testing.T) {
	t.Parallel()
	const own, other, third = 0xc1, 0xc2, 0xc3
	fresh := func(silo uint64, expect int) formationPeer {
		return formationPeer{member: "m" + FormatID(silo), silo: silo, expect: expect}
	}
	in := func(silo, clusterID uint64) formationPeer {
		return formationPeer{member: "m" + FormatID(silo), silo: silo, clusterID: clusterID}
	}
	reached := func(silo, clusterID uint64) formationPeer {
		p := in(silo, clusterID)
		p.confirmed = true
		return p
	}
	client := formationPeer{member: "client", client: true, clusterID: third}
	for _, tc := range []struct {
		name   string
		self   formation
		peers  []formationPeer
		action formationAction
		id     uint64   // formAdopt
		says   []string // in the reason or the error
	}{
		{name: "a seedless silo creates its cluster at once", self: formation{silo: 5, expect: 1, seedless: true}, action: formMint},
		{name: "founders wait until they see BootstrapExpect of them", self: formation{silo: 5, expect: 3}, peers: []formationPeer{fresh(7, 3)},
			action: formWait, says: []string{"sees 2 of the 3 founding silos", "0000000000000005", "0000000000000007"}},
		{name: "the lowest founder creates the cluster", self: formation{silo: 5, expect: 3}, peers: []formationPeer{fresh(7, 3), fresh(9, 3)}, action: formMint},
		{name: "the other founders wait for the lowest", self: formation{silo: 7, expect: 3}, peers: []formationPeer{fresh(5, 3), fresh(9, 3)},
			action: formWait, says: []string{"waiting for silo 0000000000000005"}},
		{name: "silos with another BootstrapExpect are not founders", self: formation{silo: 5, expect: 3}, peers: []formationPeer{fresh(7, 3), fresh(9, 0), fresh(11, 2)},
			action: formWait, says: []string{"sees 2 of the 3"}},
		{name: "an old incarnation of the same silo counts once", self: formation{silo: 5, expect: 2}, peers: []formationPeer{fresh(5, 2)},
			action: formWait, says: []string{"sees 1 of the 2"}},
		{name: "clients are not founders", self: formation{silo: 5, expect: 2}, peers: []formationPeer{{member: "c", client: true, expect: 2, silo: 1}},
			action: formWait, says: []string{"sees 1 of the 2"}},
		{name: "a fresh silo adopts the cluster id its peers announce", self: formation{silo: 5, expect: 3}, peers: []formationPeer{fresh(1, 3), in(9, own), in(11, own)},
			action: formAdopt, id: own},
		{name: "a join-only silo adopts", self: formation{silo: 5}, peers: []formationPeer{in(9, own)}, action: formAdopt, id: own},
		{name: "a join-only silo never creates a cluster", self: formation{silo: 5}, peers: []formationPeer{fresh(7, 0), fresh(9, 0)},
			action: formWait, says: []string{"BootstrapExpect 0", "only joins an existing cluster"}},
		{name: "peers of several clusters are refused", self: formation{silo: 5, expect: 1}, peers: []formationPeer{in(9, own), in(11, other)},
			action: formRefuse, says: []string{"several clusters", FormatID(own), FormatID(other)}},
		{name: "a client's cluster id is not adopted", self: formation{silo: 5}, peers: []formationPeer{client},
			action: formWait, says: []string{"BootstrapExpect 0"}},
		{name: "a silo with a stored id opens once it reached a live peer of its cluster", self: formation{silo: 5, clusterID: own}, peers: []formationPeer{in(11, other), in(7, own), reached(9, own)},
			action: formOpen},
		{name: "a silo with a stored id does not open on peers it only heard of", self: formation{silo: 5, clusterID: own}, peers: []formationPeer{in(11, other), in(9, own), in(7, own)},
			action: formWait, says: []string{"2 heard of, none answered"}},
		{name: "a client with a cluster id opens on a peer it heard of", self: formation{client: true, clusterID: own}, peers: []formationPeer{in(9, own)},
			action: formOpen},
		{name: "a silo with a stored id and no other seed opens at once", self: formation{silo: 5, clusterID: own, seedless: true, expect: 1}, action: formOpen},
		{name: "a silo that created its cluster opens at once", self: formation{silo: 5, clusterID: own, minted: true, expect: 3}, peers: []formationPeer{fresh(7, 3)},
			action: formOpen},
		{name: "a silo with a stored id never creates a cluster", self: formation{silo: 5, clusterID: own, expect: 2}, peers: []formationPeer{fresh(7, 2), fresh(9, 2)},
			action: formWait, says: []string{"waiting for a live peer of cluster " + FormatID(own)}},
		{name: "a silo with a stored id refuses peers of another cluster only", self: formation{silo: 5, clusterID: own}, peers: []formationPeer{in(9, other), fresh(7, 0)},
			action: formRefuse, says: []string{"belongs to cluster " + FormatID(own), "cluster " + FormatID(other) + ": members m0000000000000009"}},
		{name: "a client adopts", self: formation{client: true}, peers: []formationPeer{in(9, own)}, action: formAdopt, id: own},
		{name: "a client waits for a member with a cluster id", self: formation{client: true}, peers: []formationPeer{fresh(9, 3)},
			action: formWait, says: []string{"no live member has a cluster id"}},
		{name: "a client without seeds opens at once", self: formation{client: true, seedless: true}, action: formOpen},
	} {
		step := tc.self.next(tc.peers)
		text := step.reason
		if step.err != nil {
			text = step.err.Error()
		}
		if step.action != tc.action || (tc.action == formAdopt && step.clusterID != tc.id) {
			t.Errorf("%s: got action %d (id %016x, %q), want %d (id %016x)", tc.name, step.action, step.clusterID, text, tc.action, tc.id)
			continue
		}
		for _, want := range tc.says {
			if !strings.Contains(text, want) {
				t.Errorf("%s: %q lacks %q", tc.name, text, want)
			}
		}
	}
}
