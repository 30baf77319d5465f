// Package cluster owns Orrery's cluster membership: a protoactor ClusterProvider built on
// hashicorp/memberlist (Provider), the signal a silo uses to learn that the cluster no longer
// accepts its member id (Lost) or has retired it (Fenced), the cluster-wide record of retired
// silos, and the bootstrap of a silo's or client's protoactor cluster
// (NewMember, NewClient, Shutdown), whose actor transport runs mutual TLS when
// MemberConfig.TLS is set (cluster/transportauth).
//
// Membership. Each silo and client runs one memberlist node named after its protoactor member
// id (ActorSystem.ID, unique per process incarnation). The node metadata (JSON, at most 512
// bytes) carries the cluster name, the member id, the actor transport host and port, the kinds,
// a client flag, and for a silo its stable silo id (from its store, the same across restarts)
// and its cluster id, or, while it has none, its BootstrapExpect. The provider keeps its own
// copy of memberlist's live nodes from memberlist's join, update and leave events; on each
// event, and once per resync interval, it republishes with MemberList.UpdateClusterTopology the
// full set of live non-client members announcing its cluster id; protoactor diffs it against
// the previous set, so unchanged sets cost nothing. A member that memberlist declares dead
// disappears from the next set, and protoactor then blocks its id forever. A restarted silo
// appears under a new member id with the same silo id (Provider.SiloIDs).
//
// Cluster identity. A cluster id is a random 64-bit id a cluster gets when it is created; each
// silo records it in its store (ProviderConfig.ClusterID, OnClusterID) and announces it. Every
// silo of a cluster is given the same seed list. The rule (formation.go):
//   - A silo with a cluster id only joins silos announcing that id. Silos announcing another id
//     are left out of its topology (and logged); if, before it has published anything, it sees
//     members of another cluster and none of its own, it refuses to join, naming both ids
//     (Provider.Refused; NewMember fails with it). It never creates a cluster again: restarted
//     with the same flags it rejoins its peers, or, with no seed but itself, it is alone in its
//     cluster until they come back.
//   - A silo with no cluster id adopts the one its live peers announce; when they announce
//     several it refuses.
//   - A silo with no cluster id that sees no peer with one creates the cluster only with a
//     positive BootstrapExpect: once it sees BootstrapExpect silos with no cluster id and the
//     same BootstrapExpect (itself included, counted by silo id), the one with the lowest silo
//     id mints the cluster id and the others adopt it. BootstrapExpect 0 means 1 for a silo
//     with no seed but itself (a silo started alone creates its cluster at once), and
//     otherwise that the silo only joins an existing cluster.
//   - A client adopts the cluster id of the members it reaches and never creates one.
//
// A silo that mints or adopts an id announces it in its metadata and then exchanges state
// with every live peer over TCP: memberlist's broadcast of new metadata rides on a few UDP
// packets, and when those are lost the peers would hear of the id only at their next
// periodic exchange (ProviderConfig.PushPullInterval).
//
// Silos started at the same moment with the same flags and empty stores, BootstrapExpect their
// number, therefore form one cluster: none mints before it sees all of them, and all of them
// see the same lowest silo id. Starting more founding silos at once than BootstrapExpect says
// can form several clusters; silos added later are started without it (or with any value: a
// silo that sees a cluster id adopts it).
//
// Bootstrap gating. A node publishes nothing until the bootstrap gate opens, so a starting
// silo never briefly believes it owns every grain: it must know its cluster id (stored,
// adopted or minted) and either have minted it, have no seed other than itself, or see a live
// peer announcing it. A silo counts only a peer it reached itself (a TCP state exchange with
// its address answered): memberlist merges other nodes' views, and a client that outlived
// every silo gossips them as alive for a while, so a silo restarted alone would otherwise open
// its gate on silos that are gone. A minted or adopted id is handed to OnClusterID, which
// persists it, before the node announces it or publishes anything.
// Provider.Ready is closed at the first publish.
//
// Lost member ids. Protoactor never tells a member that its peers have dropped it (its peers
// block its id for good; it keeps serving its activations). The provider closes Provider.Lost
// when this member's id is on its own protoactor block list, when its id disappears from the
// topology it publishes after having been in it, or when it can no longer work with a majority
// of its cluster (lost.go): every resync a member sends a small memberlist message to each
// live node whose id it has blocked (the case of a silo that was paused, or cut off, long
// enough to be declared dead, and came back), saying whether the sender works with a strict
// majority of the live silos it sees. A notice from a sender with a majority loses the
// receiver its id at once; one from a sender without (itself cut off) only counts against the
// receiver's own reach, so an isolated silo that blocked the others never stops them at the
// heal, while it finds itself working with one silo of three and loses its own id. The silo
// reacts by rejoining in-process under a new member id, its store and Raft groups open; the
// Raft term, not membership, fences writes.
//
// Retired silos. A silo that the cluster gave up on (its replicas removed after it was missing
// beyond the dead bound) is retired: Provider.Retire records its silo id, persisted through
// OnRetired, and the grow-only set travels to every peer (a message when an id is added,
// memberlist's push/pull state, and a message to any live peer whose silo is retired). A silo
// that hears its own id refuses to join, or fences itself once joined; one whose store records
// it (ProviderConfig.Retired) does not start. See retired.go.
//
// Shutdown. cluster.Cluster.Shutdown(false) never calls the provider, so Shutdown here stops
// memberlist itself (without Leave, so peers detect a failure) before tearing protoactor down;
// Shutdown(c, p, true) goes through protoactor's graceful path, which leaves memberlist first.
//
// The in-process tests that start protoactor run without -race: its cluster code has known data races
// (MemberList, disthash's rendezvous, BlockList, grpclog.SetLoggerV2 per remote).
package cluster
