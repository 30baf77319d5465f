package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/memberlist"
)

// nodeMeta is what every memberlist node announces about itself (memberlist node metadata,
// JSON, at most memberlist.MetaMaxSize = 512 bytes). Short keys leave room for kinds. A member
// announces it again (memberlist UpdateNode) when it takes a cluster id.
type nodeMeta struct {
	// Cluster is the protoactor cluster name; nodes of other clusters are ignored.
	Cluster string `json:"c"`
	// ID is the protoactor member id (ActorSystem.ID), unique per process incarnation.
	ID string `json:"i"`
	// Host and Port are the protoactor remote (gRPC) address.
	Host string `json:"h"`
	Port int    `json:"p"`
	// Kinds are the grain kinds the member hosts; empty for clients.
	Kinds []string `json:"k,omitempty"`
	// Client marks a cluster client: it gossips but is never part of the topology.
	Client bool `json:"x,omitempty"`
	// Silo is the member's stable silo id (ProviderConfig.SiloID); absent for clients.
	Silo hexID `json:"s,omitempty"`
	// ClusterID is the id of the cluster the member belongs to; absent while it belongs to none
	// (it is then in no topology).
	ClusterID hexID `json:"ci,omitempty"`
	// Expect is the member's BootstrapExpect while it has no cluster id; founding silos count
	// only each other when they announce the same value.
	Expect int `json:"e,omitempty"`
	// Draining marks a silo that is handing its leaderships over before it stops: no leadership
	// is moved to it.
	Draining bool `json:"dr,omitempty"`
	// Build is the silo's ProviderConfig.Build.
	Build string `json:"b,omitempty"`
	// MutualTLS is the silo's ProviderConfig.MutualTLS.
	MutualTLS bool `json:"t,omitempty"`
	// ApplyVersion is the silo's ProviderConfig.ApplyVersion; absent (a release before apply
	// versions) means 1.
	ApplyVersion uint32 `json:"av,omitempty"`
}

// hexID is a silo or cluster id, 16 hex digits in the metadata (FormatID).
type hexID uint64

// MarshalText renders the id as FormatID does.
func (id hexID) MarshalText() ([]byte, error) { return []byte(FormatID(uint64(id))), nil }

// UnmarshalText parses hex digits.
func (id *hexID) UnmarshalText(text []byte) error {
	v, err := strconv.ParseUint(string(text), 16, 64)
	if err != nil {
		return fmt.Errorf("id %q is not hex: %w", text, err)
	}
	*id = hexID(v)
	return nil
}

// peer is the metadata's view for the cluster-identity rule.
func (m nodeMeta) peer() formationPeer {
	return formationPeer{member: m.ID, silo: uint64(m.Silo), clusterID: uint64(m.ClusterID), expect: m.Expect, client: m.Client}
}

// encodeMeta renders m, failing when it does not fit memberlist's metadata limit.
func encodeMeta(m nodeMeta) ([]byte, error) {
	if m.Cluster == "" || m.ID == "" || m.Host == "" || m.Port <= 0 {
		return nil, fmt.Errorf("node metadata incomplete: %+v", m)
	}
	m.Kinds = slices.Sorted(slices.Values(m.Kinds))
	buf, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(buf) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("node metadata is %d bytes, memberlist allows %d (too many or too long kinds)", len(buf), memberlist.MetaMaxSize)
	}
	return buf, nil
}

// decodeMeta parses node metadata; it fails for nodes that are not Orrery cluster nodes.
func decodeMeta(buf []byte) (nodeMeta, error) {
	var m nodeMeta
	if err := json.Unmarshal(buf, &m); err != nil {
		return m, err
	}
	if m.Cluster == "" || m.ID == "" || m.Host == "" || m.Port <= 0 {
		return m, errors.New("node metadata incomplete")
	}
	return m, nil
}

// member converts metadata to protoactor's topology entry.
func (m nodeMeta) member() *protocluster.Member {
	return &protocluster.Member{Id: m.ID, Host: m.Host, Port: int32(m.Port), Kinds: slices.Clone(m.Kinds)}
}

// blockedNotice is the memberlist user message a member sends to a live node whose id it has
// blocked: "you are no longer part of my topology". Receivers check the cluster name and the
// id against themselves, so a stray or stale notice cannot reach the wrong node. A notice
// only makes its receiver give up its member id when the sender works with a majority of its
// cluster's live silos (Majority), or when the receiver itself no longer does (see lost.go):
// a member that is cut off never decides the fate of the others.
type blockedNotice struct {
	// Type is always noticeBlocked.
	Type string `json:"t"`
	// Cluster is the sender's cluster name.
	Cluster string `json:"c"`
	// ID is the blocked member id (the receiver's).
	ID string `json:"i"`
	// From is the sender's member id.
	From string `json:"f"`
	// Majority: the sender works with a strict majority of the live silos it sees (Working of
	// Live, itself included).
	Majority bool `json:"m,omitempty"`
	// Working and Live are the sender's counts, for the receiver's log.
	Working int `json:"w,omitempty"`
	Live    int `json:"l,omitempty"`
}

const noticeBlocked = "blocked"

func encodeNotice(n blockedNotice) []byte {
	n.Type = noticeBlocked
	buf, _ := json.Marshal(n) // strings only: cannot fail
	return buf
}

func decodeNotice(buf []byte) (blockedNotice, bool) {
	var n blockedNotice
	if err := json.Unmarshal(buf, &n); err != nil || n.Type != noticeBlocked || n.ID == "" {
		return n, false
	}
	return n, true
}
