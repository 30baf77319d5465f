// Package raftnet owns the Raft transport between silos: a replication.Transport over
// protoactor remote, and the replication actor of each silo that hands what other silos send
// to that silo's replication.Receiver (docs/design.md §3, §6).
//
// Addressing. A replica id is a silo id: each silo hosts one replica of every group it takes
// part in, and one Transport with one replication actor, named ActorName. Config.Addresses
// maps a replica id to that actor's PID (PID(address)), so the cluster layer decides how
// stable silo ids map to the addresses of their current processes.
//
// Messages. Send encodes the messages at once (the caller's round may reuse them after it
// returns) and queues them in the destination's outbox, which holds at most
// Config.OutboxMessages: what does not fit is dropped and counted (Stats.Dropped), as Raft
// re-sends what is lost. Each outbox has a goroutine that sends whatever accumulated as one
// RaftBatch remote message (several when they exceed MaxBatchBytes). Delivery is at most
// once; the receiving actor hands each batch to Receiver.Receive.
//
// Removal. A replica removed from a group while it was cut off or down never sees its removal
// committed: its configuration still counts it, and it campaigns. A vote or pre-vote request
// from a replica that Config.Counts says the group no longer counts (this silo leads the group
// and its configuration has the sender neither as a voter nor as a learner) is still handed to
// the Receiver, and answered with a RaftRemoved naming the group, which the sender's transport
// hands to its Config.OnRemoved.
//
// Clock probes. SendClockProbe sends a ClockProbe (the sender's wall time and a probe number)
// behind the Raft messages queued for the destination; its replication actor answers at once
// with a ClockReading from Config.OnClockProbe (its wall time and its verdict on its own
// clock), which the prober's actor hands to Config.OnClockReading. Both may be lost, and the
// transport's faults apply to them as to Raft messages. The silo's clockoffset.Monitor times
// the round trip.
//
// Snapshots. SendSnapshot streams on a goroutine of its own: a SnapshotOpen carrying the
// MsgSnap, so that the receiver hands the InboundSnapshot to its Driver at once (and a Driver
// that refuses it stops the stream before its state is sent); then the chunks, numbered, never
// more than Config.SnapshotWindow beyond those the receiver's Chunks.Next has returned (each
// return acknowledges one, so the receiver holds at most a window of chunks in memory); then a
// SnapshotEnd with the chunk count. The receiver's InboundSnapshot.Done sends the verdict
// back, and the sender then calls the OutboundSnapshot's Done: nil when installed, otherwise an
// Unavailable error wrapping ErrRefused. A stream with no progress for Config.StallTimeout
// fails at both ends (ErrStalled): a receiver gone mid-stream, a sender gone, a cut. A
// receiver that no longer knows a stream (it restarted, or settled it) answers its next chunk
// with a refusal. The sender closes the snapshot's Chunks before calling Done, once. A
// rebuild of a divergent replica's state (replication.OutboundSnapshot.Rebuild) streams the
// same way, marked in its SnapshotOpen.
//
// Consistency checks. SendChecksum carries a replica's checksum of its state to the group's
// leader (Config.OnChecksum on arrival), SendRepairRequest a request to rebuild a divergent
// replica from the receiver's state (Config.OnRepairRequest); both are at most once.
//
// Faults. Config.Faults drops (Cut) or delays (Delay) the traffic between this silo and named
// replicas, both ways, at run time; a silo process arms them from FaultsEnv (ParseFaults) as
// it starts, and from the file FaultsFileEnv names while it runs (Faults.Follow, which swaps
// the whole set with Faults.Replace on each change of the file).
// The outbox applies them to what it sends, the actor to what it receives. A snapshot stream
// fails at once on the sending side (ErrCut) when a cut is in force as it starts or before it
// sends a chunk; a cut that falls while it waits for the receiver stalls it.
//
// The tests start several actor systems with remote in one process and run without -race:
// protoactor's remote calls grpclog.SetLoggerV2 on every Start, which races.
package raftnet
