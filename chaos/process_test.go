package chaos

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// TestAPortTakenBeforeTheSiloListensIsChosenAgain: a silo whose admin port another process
// binds between FreePort and the silo's listen is started again on another admin port.
func TestAPortTakenBeforeTheSiloListensIsChosenAgain(t *testing.T) {
	taken := FreePort(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", taken))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	spec := &SiloSpec{DataDir: t.TempDir(), Partitions: 2, AdminPort: taken}
	silo := StartSilo(t, spec)
	if spec.AdminPort == taken || silo.AdminAddress() != fmt.Sprintf("127.0.0.1:%d", spec.AdminPort) {
		t.Fatalf("admin port %d (process %s), want another than the taken %d", spec.AdminPort, silo.AdminAddress(), taken)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ReadPartitions(ctx, silo.AdminAddress()); err != nil {
		t.Fatalf("the relaunched silo's admin endpoint: %v", err)
	}
}

// TestClashedPortIsTheListenThatFailed: the port a silo could not bind is read from the failed
// listen, not from the other addresses its error names: the gossip port a memberlist error
// names after the actor port, the admin port, and none for another failure.
func TestClashedPortIsTheListenThatFailed(t *testing.T) {
	spec := SiloSpec{Port: 24232, GossipPort: 28429, AdminPort: 22314}
	for _, tc := range []struct {
		log  string
		want int
	}{
		{`silo: join cluster "orrery": start cluster orrery on 127.0.0.1:24232: start memberlist on 127.0.0.1:28429: could not set up network transport: failed to obtain an address: failed to start TCP listener on "127.0.0.1" port 28429: listen tcp 127.0.0.1:28429: bind: address already in use`, 28429},
		{`silo: admin endpoint on 127.0.0.1:22314: listen tcp 127.0.0.1:22314: bind: address already in use`, 22314},
		{`silo: start cluster orrery on 127.0.0.1:24232: listen tcp 127.0.0.1:24232: bind: address already in use`, 24232},
		{`silo: listen tcp 127.0.0.1:9999: bind: address already in use`, 0},
		{`silo: start cluster orrery on 127.0.0.1:24232: something else`, 0},
	} {
		p := &SiloProcess{Spec: spec, log: &lockedBuffer{}}
		_, _ = p.log.Write([]byte(tc.log + "\n"))
		if got := p.clashedPort(); got != tc.want {
			t.Errorf("clashedPort of %q = %d, want %d", tc.log, got, tc.want)
		}
	}
}
