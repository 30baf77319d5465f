package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// TestProbeFindsAPartitionThatAnswersNoCommand: the whole-cluster probe passes when every
// partition commits and answers its command, and names the one partition whose commands never
// reach an apply, although nothing else about it (the Raft tables the nemesis reads) changed.
func TestProbeFindsAPartitionThatAnswersNoCommand(t *testing.T) {
	t.Parallel()
	const partitions = 4
	tr := clienttest.New(partitions)
	t.Cleanup(func() { _ = tr.Close() })
	c := client.New(tr, client.Options{})
	ctx := context.Background()
	if err := probePartitions(ctx, c, partitions, 2*time.Second); err != nil {
		t.Fatalf("every partition serves: %v", err)
	}
	applied := tr.CommandCalls()
	if applied < partitions {
		t.Fatalf("%d command calls for %d partitions", applied, partitions)
	}
	tr.SetFaultHook(func(p int, _ *orreryv1.CommandRequest) (clienttest.Fault, error) {
		if p == 2 {
			return clienttest.FaultFailBeforeApply, nil
		}
		return clienttest.FaultNone, nil
	})
	err := probePartitions(ctx, c, partitions, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "partition 2 does not answer") {
		t.Fatalf("partition 2 answers nothing: the probe says %v", err)
	}
}
