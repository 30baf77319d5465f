package lookup

import (
	"log/slog"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// activator is a silo's activator: it activates a partition's grain, as its child, only while
// this silo's replica leads the partition, and answers with the leader it believes in
// otherwise.
type activator struct {
	cluster    *protocluster.Cluster
	kind       string
	leadership Leadership
	log        *slog.Logger
	// silos are the live silos' actor addresses by silo id, for the leader's address.
	silos func() map[uint64]string

	// active holds the grains by identity until they terminate.
	active map[string]*actor.PID
}

func newActivator(c *protocluster.Cluster, cfg Config, silos func() map[uint64]string, log *slog.Logger) *activator {
	return &activator{cluster: c, kind: cfg.Kind, leadership: cfg.Leadership, silos: silos, log: log,
		active: map[string]*actor.PID{}}
}

// Receive implements actor.Actor.
func (a *activator) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *orreryv1.PartitionActivationRequest:
		ctx.Respond(a.activate(ctx, msg))
	case *actor.Terminated:
		a.terminated(msg.GetWho())
	case *actor.Stopping:
		a.stopAll(ctx)
	}
}

// activate answers req: the grain's PID when this silo's replica leads its partition
// (activating it if needed), otherwise the leader this replica believes in and its actor
// address, after telling a grain it holds for the partition to stop.
func (a *activator) activate(ctx actor.Context, req *orreryv1.PartitionActivationRequest) *orreryv1.PartitionActivationReply {
	identity := req.GetIdentity()
	n, err := strconv.Atoi(identity)
	if req.GetKind() != a.kind || err != nil || n < 0 {
		a.log.Error("partition activator: not a partition of its kind", "kind", req.GetKind(), "identity", identity)
		return &orreryv1.PartitionActivationReply{}
	}
	pid, active := a.active[identity]
	if !a.leadership.Leads(n) {
		if active {
			ctx.Poison(pid)
		}
		leader := a.leadership.Leader(n)
		return &orreryv1.PartitionActivationReply{LeaderSilo: leader, LeaderAddress: a.silos()[leader]}
	}
	if active {
		return &orreryv1.PartitionActivationReply{PidAddress: pid.GetAddress(), PidId: pid.GetId()}
	}
	kind, ok := a.cluster.TryGetClusterKind(a.kind)
	if !ok {
		a.log.Error("partition activator: this member does not host the kind", "kind", a.kind)
		return &orreryv1.PartitionActivationReply{}
	}
	pid = ctx.SpawnPrefix(protocluster.WithClusterIdentity(kind.Props, protocluster.NewClusterIdentity(identity, a.kind)), identity)
	kind.Inc()
	a.active[identity] = pid
	return &orreryv1.PartitionActivationReply{PidAddress: pid.GetAddress(), PidId: pid.GetId()}
}

// terminated forgets a grain that stopped.
func (a *activator) terminated(who *actor.PID) {
	for identity, pid := range a.active {
		if pid.Equal(who) {
			delete(a.active, identity)
			if kind, ok := a.cluster.TryGetClusterKind(a.kind); ok {
				kind.Dec()
			}
			return
		}
	}
}

// stopAll stops every grain, each after the messages in its mailbox, and waits for them.
func (a *activator) stopAll(ctx actor.Context) {
	futures := make(map[string]*actor.Future, len(a.active))
	for identity, pid := range a.active {
		futures[identity] = ctx.PoisonFuture(pid)
	}
	for identity, future := range futures {
		if err := future.Wait(); err != nil {
			a.log.Error("partition activator: stopping a grain", "identity", identity, "err", err)
		}
	}
}
