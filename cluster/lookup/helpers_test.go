package lookup

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/internal/testkit"
)

// These tests start protoactor clusters in one process on loopback ports chosen at run time;
// like package cluster's, they run without -race (protoactor-go's cluster code has known data
// races).

// partitions is the partition count of the tests' clusters.
const partitions = 4

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// leaders is the leadership every silo of a test cluster agrees on, switched by the test:
// partition n's leader silo, 0 for none.
type leaders struct {
	mu     sync.Mutex
	leader map[int]uint64
}

func (l *leaders) set(n int, silo uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader[n] = silo
}

func (l *leaders) of(n int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader[n]
}

// view is one silo's Leadership over leaders; it counts the activator's questions.
type view struct {
	leaders *leaders
	self    uint64
	asked   [partitions]atomic.Int64
}

func (v *view) Leads(n int) bool {
	v.asked[n].Add(1)
	return v.leaders.of(n) == v.self
}

func (v *view) Leader(n int) uint64 { return v.leaders.of(n) }

// silo is one member of a test cluster, with its lookup and the echo grains' counters.
type silo struct {
	id        uint64
	c         *protocluster.Cluster
	p         *cluster.Provider
	lookup    *Lookup
	view      *view
	transport *cluster.PartitionTransport
	// notLeader counts the not-leader answers of this silo's grains; started and stopped
	// count their activations.
	notLeader, started, stopped atomic.Int64
	once                        sync.Once
}

// stop leaves memberlist and tears the member down without protoactor's graceful sleep.
func (s *silo) stop() {
	s.once.Do(func() {
		_ = s.transport.Close()
		_ = s.p.Shutdown(true)
		_ = cluster.Shutdown(s.c, s.p, false)
	})
}

// echoKind is a partition kind whose grains answer an InspectRequest with the id of the silo
// they run on (PartitionStatus.silo) while the leaders say it leads their partition, and
// otherwise, as partition grains do, with Unavailable naming the leader, stopping themselves.
func echoKind(s *silo, l *leaders) *protocluster.Kind {
	return protocluster.NewKind(cluster.PartitionKind, actor.PropsFromProducer(func() actor.Actor {
		n := -1
		return actor.ReceiveFunc(func(ctx actor.Context) {
			switch msg := ctx.Message().(type) {
			case *actor.Started:
				s.started.Add(1)
			case *actor.Stopped:
				s.stopped.Add(1)
			case *protocluster.ClusterInit:
				n, _ = strconv.Atoi(msg.Identity.GetIdentity())
			case *orreryv1.InspectRequest:
				if leader := l.of(n); leader != s.id {
					s.notLeader.Add(1)
					e := orrery.Errorf(orrery.CodeUnavailable, "partition %d: not the leader", n)
					e.LeaderSilo = leader
					ctx.Respond(&orreryv1.InspectReply{Error: e.Proto()})
					ctx.Poison(ctx.Self())
					return
				}
				ctx.Respond(&orreryv1.InspectReply{Partition: &orreryv1.PartitionStatus{Partition: int32(n), Silo: cluster.FormatID(s.id)}})
			}
		})
	}))
}

// testCluster is three silos, ids 1 to 3, sharing one leaders table, and optionally a client.
type testCluster struct {
	t       *testing.T
	name    string
	leaders *leaders
	silos   []*silo
}

// startCluster starts three members of a cluster named name, the first founding it and the
// others joining it, and waits until each sees all three.
func startCluster(t *testing.T, name string) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, name: name, leaders: &leaders{leader: map[int]uint64{}}}
	var seeds []string
	for id := uint64(1); id <= 3; id++ {
		s := &silo{id: id}
		s.view = &view{leaders: tc.leaders, self: id}
		s.lookup = New(Config{Kind: cluster.PartitionKind, Leadership: s.view, Logger: quiet})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, p, err := cluster.NewMember(ctx, cluster.MemberConfig{
			Name: name, Kinds: []*protocluster.Kind{echoKind(s, tc.leaders)}, IdentityLookup: s.lookup,
			Gossip: cluster.ProviderConfig{SiloID: id, Seeds: seeds}, Logger: quiet,
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		s.c, s.p = c, p
		s.transport = cluster.NewPartitionTransport(c, partitions, 2*time.Second)
		t.Cleanup(s.stop)
		if seeds == nil {
			seeds = []string{p.GossipAddress()}
		}
		tc.silos = append(tc.silos, s)
	}
	for _, s := range tc.silos {
		testkit.Eventually(t, 20*time.Second, "every member to see three silos", func() bool { return len(s.lookup.silos()) == 3 })
	}
	return tc
}

// silo returns the member with silo id id.
func (tc *testCluster) silo(id uint64) *silo { return tc.silos[id-1] }

// client is a cluster client of tc with its lookup (no Leadership) and transport.
type client struct {
	c         *protocluster.Cluster
	lookup    *Lookup
	transport *cluster.PartitionTransport
}

func (tc *testCluster) startClient() *client {
	tc.t.Helper()
	return tc.startClientWith(Config{Kind: cluster.PartitionKind, Logger: quiet})
}

// startClientWith starts a client whose lookup is configured by cfg.
func (tc *testCluster) startClientWith(cfg Config) *client {
	tc.t.Helper()
	l := New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, p, err := cluster.NewClient(ctx, cluster.MemberConfig{
		Name: tc.name, IdentityLookup: l, Logger: quiet,
		Gossip: cluster.ProviderConfig{Seeds: []string{tc.silos[0].p.GossipAddress()}},
	})
	if err != nil {
		tc.t.Fatal(err)
	}
	cl := &client{c: c, lookup: l, transport: cluster.NewPartitionTransport(c, partitions, 2*time.Second)}
	tc.t.Cleanup(func() {
		_ = cl.transport.Close()
		_ = cluster.Shutdown(c, p, true)
	})
	testkit.Eventually(tc.t, 20*time.Second, "the client to see three silos", func() bool { return len(p.Topology()) == 3 })
	return cl
}

// servedBy inspects partition n through transport and returns the silo id that answered.
func servedBy(ctx context.Context, transport *cluster.PartitionTransport, n int) (string, error) {
	reply, err := transport.Inspect(ctx, n, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_Partition{Partition: &orreryv1.InspectPartition{}}})
	if err != nil {
		return "", err
	}
	if e := reply.GetError(); e != nil {
		return "", orrery.FromProto(e)
	}
	return reply.GetPartition().GetSilo(), nil
}

// mustServe inspects partition n through transport (10 s deadline) and fails unless silo want
// answered. An Unavailable attempt (one that timed out on a loaded machine) is tried again,
// as a client does: the transport itself makes one attempt per leader it is named.
func mustServe(t *testing.T, transport *cluster.PartitionTransport, n int, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := servedBy(ctx, transport, n)
	for errors.Is(err, orrery.ErrUnavailable) && ctx.Err() == nil {
		t.Logf("partition %d: %v; trying again", n, err)
		time.Sleep(100 * time.Millisecond)
		got, err = servedBy(ctx, transport, n)
	}
	if err != nil {
		t.Fatalf("partition %d: %v, want it served by silo %d", n, err, want)
	}
	if got != cluster.FormatID(want) {
		t.Fatalf("partition %d served by silo %s, want %s", n, got, cluster.FormatID(want))
	}
}
