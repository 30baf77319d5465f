package cluster

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FormatID renders a silo or cluster id as the 16 hex digits that node metadata, logs and
// errors show.
func FormatID(id uint64) string { return fmt.Sprintf("%016x", id) }

// formationPeer is what the cluster-identity rule knows of one live node of this cluster name
// other than this one, from its metadata.
type formationPeer struct {
	member    string
	silo      uint64
	clusterID uint64
	expect    int
	client    bool
	// confirmed is set when this node reached the peer itself (it answered a probe of this
	// node's), not only heard of it from another node's view, which can be stale.
	confirmed bool
}

// formation is this node's side of the cluster-identity rule (doc.go, "Cluster identity"). It
// is a pure rule: next looks at the live peers and says what to do; the provider does it and
// records the outcome in clusterID and minted.
type formation struct {
	silo      uint64 // this silo's id (0 for a client)
	clusterID uint64 // the known cluster id: stored, adopted or minted here; 0: none yet
	minted    bool   // this node minted clusterID
	expect    int    // BootstrapExpect after defaults; 0: never mint
	seedless  bool   // no seed other than this node's own address
	client    bool
}

// formationAction is what formation.next asks the provider to do.
type formationAction int

const (
	// formWait: nothing to do yet; reason says what the node waits for.
	formWait formationAction = iota
	// formOpen: open the bootstrap gate (publish topologies); reason says why.
	formOpen
	// formAdopt: take clusterID, the one cluster id the peers announce.
	formAdopt
	// formMint: create a new cluster id.
	formMint
	// formRefuse: this node must not join; err says why.
	formRefuse
)

// formationStep is formation.next's answer.
type formationStep struct {
	action    formationAction
	clusterID uint64
	reason    string
	err       error
}

// next applies the rule to the live peers (any order; clients among them are ignored).
func (f formation) next(peers []formationPeer) formationStep {
	peers = slices.DeleteFunc(slices.Clone(peers), func(p formationPeer) bool { return p.client })
	if f.clusterID != 0 {
		return f.nextKnown(peers)
	}
	ids := map[uint64][]string{} // cluster id -> member ids announcing it
	for _, p := range peers {
		if p.clusterID != 0 {
			ids[p.clusterID] = append(ids[p.clusterID], p.member)
		}
	}
	switch len(ids) {
	case 0:
	case 1:
		for id := range ids {
			return formationStep{action: formAdopt, clusterID: id}
		}
	default:
		return formationStep{action: formRefuse, err: fmt.Errorf(
			"the live peers belong to several clusters (%s): the seeds must name silos of one cluster", describeClusters(ids))}
	}
	switch {
	case f.client && f.seedless:
		return formationStep{action: formOpen, reason: "a client without seeds"}
	case f.client:
		return formationStep{action: formWait, reason: "no live member has a cluster id yet"}
	case f.expect == 0:
		return formationStep{action: formWait, reason: "no live peer has a cluster id, and with BootstrapExpect 0 this silo only joins an existing cluster: " +
			"to create one, start every founding silo with BootstrapExpect set to their number"}
	}
	founders := map[uint64]bool{f.silo: true}
	for _, p := range peers {
		if p.clusterID == 0 && p.expect == f.expect && p.silo != 0 {
			founders[p.silo] = true
		}
	}
	if len(founders) < f.expect {
		return formationStep{action: formWait, reason: fmt.Sprintf(
			"waiting to create the cluster: sees %d of the %d founding silos (no cluster id, BootstrapExpect %d): %s",
			len(founders), f.expect, f.expect, describeSilos(founders))}
	}
	lowest := slices.Min(slices.Collect(maps.Keys(founders)))
	if lowest != f.silo {
		return formationStep{action: formWait, reason: fmt.Sprintf(
			"waiting for silo %s, the lowest silo id of the founding silos %s, to create the cluster", FormatID(lowest), describeSilos(founders))}
	}
	return formationStep{action: formMint}
}

// nextKnown is the rule for a node that knows its cluster id: it opens the gate once it has
// created the cluster, has no other seed, or reached a live peer of its cluster itself (a
// peer only heard of, from a view that may be stale, does not count for a silo: a client that
// outlived every silo still gossips them as alive for a while); it refuses when every cluster
// member it sees belongs to another cluster.
func (f formation) nextKnown(peers []formationPeer) formationStep {
	own := FormatID(f.clusterID)
	foreign := map[uint64][]string{}
	heardOf := 0
	for _, p := range peers {
		switch p.clusterID {
		case f.clusterID:
			if p.confirmed || f.client {
				return formationStep{action: formOpen, reason: "a live peer of cluster " + own}
			}
			heardOf++
		case 0:
		default:
			foreign[p.clusterID] = append(foreign[p.clusterID], p.member)
		}
	}
	switch {
	case f.minted:
		return formationStep{action: formOpen, reason: "created cluster " + own}
	case f.seedless:
		return formationStep{action: formOpen, reason: "no other seed: the first silo of cluster " + own}
	case heardOf > 0:
		return formationStep{action: formWait, reason: fmt.Sprintf("waiting for a live peer of cluster %s: %d heard of, none answered this silo's probe yet", own, heardOf)}
	case len(foreign) > 0:
		return formationStep{action: formRefuse, err: fmt.Errorf(
			"this silo belongs to cluster %s, but the live silos it reached belong to another cluster (%s) and none to its own: "+
				"it never joins another cluster (start it with the seeds of cluster %s, or with an empty data dir to join as a new silo)",
			own, describeClusters(foreign), own)}
	}
	return formationStep{action: formWait, reason: "waiting for a live peer of cluster " + own + " (a silo that has a cluster id never creates one)"}
}

// randomID is a random non-zero 64-bit id (a cluster id, or a silo id for a member without one).
func randomID() (uint64, error) {
	for {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
}

// describeClusters renders cluster ids with the members announcing them, sorted.
func describeClusters(ids map[uint64][]string) string {
	var parts []string
	for id, members := range ids {
		slices.Sort(members)
		parts = append(parts, fmt.Sprintf("cluster %s: members %s", FormatID(id), strings.Join(members, ", ")))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// describeSilos renders silo ids, sorted.
func describeSilos(silos map[uint64]bool) string {
	ids := slices.Sorted(maps.Keys(silos))
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = FormatID(id)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
