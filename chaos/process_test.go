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
