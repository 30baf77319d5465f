package raftnet

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/orreryhq/orrery/actors"
	"github.com/orreryhq/orrery/replication"
)

// testMessageBytes is the gRPC message limit of the tests' remotes.
const testMessageBytes = 64 << 20

// net is several silos' transports in one process, each on its own actor system with remote
// on a loopback port chosen at run time, resolving replica ids through one shared table.
type net struct {
	t  *testing.T
	mu sync.Mutex
	// addresses maps replica ids to their actor systems' addresses.
	addresses map[uint64]string
}

func newNet(t *testing.T) *net { return &net{t: t, addresses: map[uint64]string{}} }

func (n *net) resolve(replica uint64) (*actor.PID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	address, ok := n.addresses[replica]
	if !ok {
		return nil, false
	}
	return PID(address), true
}

// silo is one actor system with remote and its transport.
type silo struct {
	id        uint64
	system    *actor.ActorSystem
	remote    *remote.Remote
	transport *Transport
	faults    *Faults
	stopOnce  sync.Once
}

// start starts silo id with cfg's tunables (Self, System, Addresses and Faults are set here).
func (n *net) start(id uint64, cfg Config) *silo {
	n.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actors.LoggerOption(quiet.Handler(), slog.LevelError))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0,
		remote.WithServerOptions(grpc.MaxRecvMsgSize(testMessageBytes), grpc.MaxSendMsgSize(testMessageBytes)),
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(testMessageBytes), grpc.MaxCallSendMsgSize(testMessageBytes))),
	))
	r.Start()
	s := &silo{id: id, system: system, remote: r, faults: &Faults{}}
	cfg.Self, cfg.System, cfg.Addresses, cfg.Faults = id, system, n.resolve, s.faults
	tr, err := New(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	s.transport = tr
	n.mu.Lock()
	n.addresses[id] = system.Address()
	n.mu.Unlock()
	n.t.Cleanup(s.stop)
	return s
}

// stop closes the silo's transport and shuts its remote down.
func (s *silo) stop() {
	s.stopOnce.Do(func() {
		_ = s.transport.Close()
		s.remote.Shutdown(false)
	})
}

// recorder is a Receiver that records what arrives; snapshots go to onSnapshot, when set.
type recorder struct {
	mu         sync.Mutex
	batches    [][]replication.Message
	onSnapshot func(in replication.InboundSnapshot)
}

func (r *recorder) Receive(msgs []replication.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, msgs)
}

func (r *recorder) ReceiveSnapshot(in replication.InboundSnapshot) {
	r.mu.Lock()
	on := r.onSnapshot
	r.mu.Unlock()
	if on == nil {
		in.Done(nil)
		return
	}
	go on(in)
}

func (r *recorder) ReportSnapshot(int, uint64, error) {}

// received returns how many batches and messages arrived.
func (r *recorder) received() (batches, messages int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		messages += len(b)
	}
	return len(r.batches), messages
}

// outcome is an OutboundSnapshot's Done, recorded.
type outcome struct {
	mu    sync.Mutex
	calls int
	err   error
	at    time.Time
	done  chan struct{}
}

func newOutcome() *outcome { return &outcome{done: make(chan struct{})} }

func (o *outcome) report(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if o.calls == 1 {
		o.err, o.at = err, time.Now()
		close(o.done)
	}
}

// wait returns Done's error once it was called, failing the test after timeout.
func (o *outcome) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(timeout):
		t.Fatalf("snapshot Done not called within %v", timeout)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
