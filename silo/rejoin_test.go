package silo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestABlockedSiloRejoinsInProcess: three silos; the two others block the third one's member
// id, as protoactor does for good once memberlist declared a member dead (it was paused or cut
// off) and it came back. The third silo does not stop: it rejoins under a new member id with
// the same silo id and data, its replicas serve again, its readiness comes back, and the two
// others keep their ids and never stop.
func TestABlockedSiloRejoinsInProcess(t *testing.T) {
	const partitions = 8
	silos := startFounders(t, 3, partitions)
	waitAllVoters(t, silos, partitions)
	a, b, x := silos[0], silos[1], silos[2]
	aID, bID, old := a.ID(), b.ID(), x.ID()

	start := time.Now()
	for _, s := range []*Silo{a, b} {
		s.member().cluster.Remote.BlockList().Block(old)
	}
	testkit.Eventually(t, 30*time.Second, "the blocked silo to rejoin under a new member id", func() bool {
		return x.Rejoins() == 1 && !x.Rejoining() && x.ID() != old
	})
	t.Logf("rejoined as %s (was %s) %v after the block", x.ID(), old, time.Since(start).Round(time.Millisecond))
	testkit.Eventually(t, 20*time.Second, "both peers to see the new member id", func() bool {
		for _, s := range []*Silo{a, b} {
			if !slices.ContainsFunc(s.member().provider.Topology(), func(m *protocluster.Member) bool { return m.Id == x.ID() }) {
				return false
			}
		}
		return true
	})
	testkit.Eventually(t, 30*time.Second, "every partition to answer through every silo", func() bool {
		for _, s := range silos {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			for n := range partitions {
				if _, err := s.Client().PartitionStatus(ctx, n); err != nil {
					cancel()
					return false
				}
			}
			cancel()
		}
		return true
	})
	// The rejoined silo's replicas follow the groups again: a command committed now, through
	// the rejoined silo's own client, on a lane of every partition is applied on its replica.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed := make([]uint64, partitions)
	for i := 0; slices.Contains(committed, 0); i++ {
		lane := &orreryv1.Lane{Namespace: "ns", Queue: "rejoin", Key: fmt.Sprint("k", i)}
		n := route.Partition(lane, partitions)
		if committed[n] != 0 {
			continue
		}
		if _, err := x.Client().ConfigureSchedule(ctx, everySchedule(lane, uuid.NewString()), 0); err != nil {
			t.Fatalf("partition %d through the rejoined silo: %v", n, err)
		}
		for _, s := range []*Silo{a, b} {
			if st, ok := s.host.Status(n); ok && st.CanPropose {
				committed[n] = st.CommitIndex
			}
		}
		if committed[n] == 0 {
			committed[n] = 1 // led by x itself: applied there first
		}
	}
	testkit.Eventually(t, 30*time.Second, "the rejoined silo's replicas to apply what the groups commit", func() bool {
		for n := range partitions {
			if st, _ := x.host.Status(n); st.AppliedIndex < committed[n] {
				return false
			}
		}
		return true
	})
	testkit.Eventually(t, 20*time.Second, "the rejoined silo to be ready", func() bool {
		code, _ := getJSON(t, "http://"+x.AdminAddress()+"/readyz")
		return code == http.StatusOK
	})
	for _, s := range silos {
		select {
		case <-s.Done():
			t.Fatalf("silo %s stopped: %v", cluster.FormatID(s.SiloID()), s.Err())
		default:
		}
	}
	if a.ID() != aID || b.ID() != bID || a.Rejoins() != 0 || b.Rejoins() != 0 {
		t.Fatalf("a silo that blocked the other rejoined too: ids %s→%s %s→%s, rejoins %d %d",
			aID, a.ID(), bID, b.ID(), a.Rejoins(), b.Rejoins())
	}
	sc := scrapeMetrics(t, x)
	if got := sc.sum(t, "orrery_member_rejoins_total"); got != 1 {
		t.Fatalf("orrery_member_rejoins_total = %v, want 1", got)
	}
}

// TestASiloWaitsForItsStoppedCluster: both silos of a cluster stop; one is started again alone.
// Its store records the cluster, so it waits for its peer well past OpenTimeout instead of
// giving up, its /readyz answering 503 with what it waits for; once the other is started too,
// both serve.
func TestASiloWaitsForItsStoppedCluster(t *testing.T) {
	const partitions = 4
	var cfgs []Config
	silos := startFounders(t, 2, partitions, func(c *Config) {
		c.Admin = fmt.Sprintf("127.0.0.1:%d", gossipPort(t))
		c.OpenTimeout = 3 * time.Second
		cfgs = append(cfgs, *c)
	})
	for _, s := range silos {
		s.Stop()
	}
	first := cfgs[0]
	type started struct {
		s   *Silo
		err error
	}
	done := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s, err := Start(ctx, first)
		done <- started{s, err}
	}()
	var reason string
	testkit.Eventually(t, 10*time.Second, "the lone silo's readyz to say it is joining", func() bool {
		resp, err := http.Get("http://" + first.Admin + "/readyz")
		if err != nil {
			return false // not listening yet
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		reason, _ = body["reason"].(string)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(reason, "joining cluster")
	})
	t.Logf("readyz while alone: %s", reason)
	time.Sleep(2 * first.OpenTimeout) // past OpenTimeout: a silo of an existing cluster still waits
	select {
	case r := <-done:
		if r.s != nil {
			r.s.Stop()
		}
		t.Fatalf("the lone silo returned before its peer came back: %v", r.err)
	default:
	}
	second := startSilo(t, cfgs[1].DataDir, func(c *Config) { *c = cfgs[1] })
	r := <-done
	if r.err != nil {
		t.Fatalf("the first silo did not join once its peer was back: %v", r.err)
	}
	t.Cleanup(r.s.Stop)
	for _, s := range []*Silo{r.s, second} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		for n := range partitions {
			if _, err := s.Client().PartitionStatus(ctx, n); err != nil {
				t.Errorf("partition %d: %v", n, err)
			}
		}
		cancel()
	}
}
