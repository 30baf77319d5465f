package silo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestARestartedSiloKeepsItsIdentity: a silo restarted on its data dir with the same flags has
// a new member id and the same silo and cluster ids, which its store kept.
func TestARestartedSiloKeepsItsIdentity(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	first := startSilo(t, dataDir, nil)
	memberID, siloID, clusterID := first.ID(), first.SiloID(), first.ClusterID()
	if siloID == 0 || clusterID == 0 {
		t.Fatalf("silo %016x in cluster %016x, want non-zero ids", siloID, clusterID)
	}
	first.Stop()
	again := startSilo(t, dataDir, nil)
	if again.ID() == memberID || again.SiloID() != siloID || again.ClusterID() != clusterID {
		t.Fatalf("restarted: member %s silo %s cluster %s, want a new member id (not %s), silo %s, cluster %s",
			again.ID(), cluster.FormatID(again.SiloID()), cluster.FormatID(again.ClusterID()),
			memberID, cluster.FormatID(siloID), cluster.FormatID(clusterID))
	}
}

// TestADataDirOfAnotherClusterIsRefused: a silo whose data dir belongs to one cluster, started
// with the seeds of another, fails to start naming its data dir and both cluster ids; the
// other cluster keeps serving.
func TestADataDirOfAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	running := startSilo(t, t.TempDir(), nil)
	strayDir := t.TempDir()
	stray := startSilo(t, strayDir, nil) // founds a cluster of its own
	strayCluster := stray.ClusterID()
	stray.Stop()
	if strayCluster == running.ClusterID() {
		t.Fatalf("two seedless silos share cluster id %016x", strayCluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{DataDir: strayDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true, Seeds: []string{running.GossipAddress()}})
	if err == nil {
		s.Stop()
		t.Fatal("a silo of another cluster joined")
	}
	t.Logf("Start: %v", err)
	for _, want := range []string{strayDir, "belongs to cluster " + cluster.FormatID(strayCluster), "cluster " + cluster.FormatID(running.ClusterID())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if code, body := getJSON(t, "http://"+running.AdminAddress()+"/readyz"); code != http.StatusOK {
		t.Fatalf("the running silo's readyz after the refusal: %d %v", code, body)
	}
}

// TestAJoinOnlySiloNamesBootstrapExpect: a silo with an empty data dir, seeds and no
// BootstrapExpect that finds no cluster within its open timeout fails, saying that it only
// joins and which flag creates a cluster.
func TestAJoinOnlySiloNamesBootstrapExpect(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	_, err := Start(context.Background(), Config{DataDir: dataDir, Partitions: 8, Admin: "127.0.0.1:0", Logger: quiet, InsecureDev: true,
		Seeds: []string{"127.0.0.1:1"}, OpenTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("a join-only silo with no cluster to join started")
	}
	for _, want := range []string{dataDir, "no cluster yet", "--bootstrap-expect", "127.0.0.1:1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestSilosStartedTogetherFormOneCluster: three silos with empty data dirs, started at the
// same moment with the same seeds and BootstrapExpect 3, form one cluster and record its id.
func TestSilosStartedTogetherFormOneCluster(t *testing.T) {
	t.Parallel()
	silos := startFounders(t, 3, 8)
	for _, s := range silos {
		if s.ClusterID() == 0 || s.ClusterID() != silos[0].ClusterID() {
			t.Fatalf("silo %s in cluster %s, silo %s in %s", cluster.FormatID(s.SiloID()), cluster.FormatID(s.ClusterID()),
				cluster.FormatID(silos[0].SiloID()), cluster.FormatID(silos[0].ClusterID()))
		}
	}
	testkit.Eventually(t, 10*time.Second, "every silo to see all three", func() bool {
		for _, s := range silos {
			if len(s.member().provider.Topology()) != 3 {
				return false
			}
		}
		return true
	})
}

// gossipPort returns a loopback port whose TCP and UDP twins were free a moment ago, below the
// usual ephemeral range, and that it never returned before in this process.
func gossipPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if !handOut(port) {
			continue // handed to another silo of this process already, maybe not bound yet
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// handedOut are the ports gossipPort returned in this test process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut reports whether port was never handed out before, and records it: a port chosen
// for one silo but not yet bound looks free, and must not be chosen again for another.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}
