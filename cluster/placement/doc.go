// Package placement decides where each partition's replicas and leadership belong (docs/design.md §6):
// a partition's target replica set, the R live silos ranked highest by a rendezvous hash of
// (partition, silo id); the next single configuration change that moves a group toward its
// target (Next); and whether its leadership should move to even out leaderships (Balance).
//
// It is pure: it reads no clock and does no I/O. The silo's placement loop feeds it what the
// group's leader sees (its Raft configuration and its followers' progress) and what the
// membership says (live silos, and those dead longer than the configured bound), and performs
// the step it returns through the replication driver, one step per group at a time.
//
// The steps, in the order Next takes them:
//  1. promote a learner of the target set once it has caught up;
//  2. remove a learner outside the target set whose silo is live (a rebalance) or gone; one
//     out of the leader's sight but not gone yet waits, as a dead voter does;
//  3. add a target silo that holds no replica as a learner, while no other learner of the
//     target set is still catching up (one snapshot in flight per group);
//  4. remove a voter outside the target set when its silo is gone (dead longer than the bound,
//     or no longer known), or, while it is alive, once every target silo is a voter; a leader
//     outside the target set hands its leadership to a caught-up target voter instead.
//
// Every step changes one replica, so a configuration never changes by more than one voter at
// a time and a quorum of the old configuration is always a majority of the new one minus at
// most one; the driver still refuses a removal that would leave no live quorum. A dead voter
// that has not yet been gone for the bound stays a voter: its replacement is added first, and
// it is removed only once the bound has passed, so a silo that restarts quickly keeps its
// replicas.
package placement
