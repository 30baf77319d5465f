// Package cluster owns Orrery's cluster membership: a protoactor ClusterProvider built on
// hashicorp/memberlist (Provider), the self-fencing signal a silo uses to learn that the
// cluster has dropped it, and the bootstrap of a silo's or client's protoactor cluster
// (NewMember, NewClient, Shutdown).
//
// Membership. Each silo and client runs one memberlist node named after its protoactor member
// id (ActorSystem.ID, unique per process incarnation). The node metadata (JSON, at most 512
// bytes) carries the cluster name, the member id, the actor transport host and port, the kinds
// and a client flag. Whenever memberlist reports a join, leave or update, and once per resync
// interval, the provider republishes the full set of live non-client members of its cluster
// with MemberList.UpdateClusterTopology; protoactor diffs it against the previous set, so
// unchanged sets cost nothing. A member that memberlist declares dead disappears from the next
// set, and protoactor then blocks its id forever.
//
// Bootstrap gating. A node with seeds publishes nothing until a Join has succeeded or another
// member of its cluster has joined it, so a starting silo never briefly believes it owns every
// grain. A node with no seeds (other than itself), or configured with Bootstrap, is the first
// of its cluster and publishes at once. Provider.Ready is closed at the first publish.
//
// Self-fencing. Protoactor never tells a member that its peers have dropped it (its peers
// block its id; it keeps serving its activations). The provider closes Provider.Fenced when
// this member's id is on its own protoactor block list, when its id disappears from the
// topology it publishes after having been in it, or when a peer tells it so: every resync a
// member sends a small memberlist message to each live node whose id it has blocked (the case
// of a silo that was paused, or cut off, long enough to be declared dead, and came back). The
// silo reacts by closing its partitions and exiting; a restarted silo has a new id.
//
// Shutdown. cluster.Cluster.Shutdown(false) never calls the provider, so Shutdown here stops
// memberlist itself (without Leave, so peers detect a failure) before tearing protoactor down;
// Shutdown(c, p, true) goes through protoactor's graceful path, which leaves memberlist first.
//
// The in-process tests run without -race: protoactor's cluster code has known data races
// (MemberList, disthash's rendezvous, BlockList, grpclog.SetLoggerV2 per remote).
package cluster
