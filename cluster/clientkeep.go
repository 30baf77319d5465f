package cluster

import (
	"slices"
	"strings"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
)

// clientKeep is how long a client goes on publishing to protoactor a silo member that left its
// view: longer than any split or pause a cluster rides out.
const clientKeep = 15 * time.Minute

// keptMembers is, on a client, the member set it publishes to protoactor: every silo member it
// saw live within clientKeep. Protoactor blocks, for good, the id of a member that leaves its
// topology, refusing the connections that member opens to carry its replies; a silo must then
// take a new member id before it can answer again (lost.go). A silo learns that it must from
// the notices of the silos that blocked it, but a client sends none (it speaks for no
// majority), so a silo a client dropped while memberlist held it dead (on the far side of a
// split the client reaches both sides of, or paused) would never again answer that client
// under the same id, though it serves every silo. The client routes by its live topology
// (Provider.Topology), not by this set; a call in flight to a silo that died ends at its
// attempt timeout, since protoactor reports no departure.
type keptMembers struct {
	byID map[string]keptMember
}

// keptMember is one member of keptMembers and when it was last live.
type keptMember struct {
	member *protocluster.Member
	seen   time.Time
}

// publish returns, sorted by id, the set to publish at now: the live members and those live
// within clientKeep; it forgets the others.
func (k *keptMembers) publish(live []*protocluster.Member, now time.Time) []*protocluster.Member {
	if k.byID == nil {
		k.byID = map[string]keptMember{}
	}
	for _, m := range live {
		k.byID[m.GetId()] = keptMember{member: m, seen: now}
	}
	out := make([]*protocluster.Member, 0, len(k.byID))
	for id, kept := range k.byID {
		if now.Sub(kept.seen) > clientKeep {
			delete(k.byID, id)
			continue
		}
		out = append(out, kept.member)
	}
	slices.SortFunc(out, func(a, b *protocluster.Member) int { return strings.Compare(a.GetId(), b.GetId()) })
	return out
}
