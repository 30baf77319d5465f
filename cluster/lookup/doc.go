// Package lookup owns the placement of partition grains on their Raft leaders (docs/design.md §6): a
// protoactor IdentityLookup (Lookup) that resolves partition/<n> to its activation on the
// silo whose replica of partition n leads, and each silo's activator, which activates the
// grain only where that replica leads.
//
// Resolving. Get asks the activator (actor ActivatorName) of the silo believed to lead n: the
// last one a hint named (Hint, or an activator's answer), else the silo ranked first for n by
// a rendezvous hash over the live silos' ids. An activator whose silo's replica leads n
// (Leadership.Leads) answers with the grain's PID, spawning it as its child if it is not
// active; any other answers with the silo its replica believes leads (Leadership.Leader).
// Get follows such answers, then the remaining silos in rendezvous order, for at most
// maxAsks asks of askTimeout each, and returns nil when none leads: protoactor's Request then
// fails the attempt, and the caller (actors.Call, PartitionTransport) retries.
//
// Leadership moves. A grain whose replica stops leading answers the next request it gets
// Unavailable with the leader it believes in (orrery.Error.LeaderSilo) and stops itself;
// PartitionTransport records that hint (Hint), drops the cached PID and retries there at once.
// An activator asked for a partition its replica does not lead stops the activation it holds
// for it. It forgets an activation when the activation terminates.
//
// A client, or a member without Leadership, runs no activator; its Get works the same.
package lookup
