package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
)

// TestCrashBoundaries arms each failpoint in a real silo process so that it SIGKILLs itself
// during the second command (the first commits normally), restarts it on the same data, and
// checks docs/design.md §3's rule: the command is wholly absent or wholly present, and a retry with the
// same command id returns the receipt written before the crash. With one replica every
// boundary is past the entry's synced append, so the restarted sole voter commits and applies
// it: present at each of them.
func TestCrashBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	for _, tc := range []struct {
		failpoint string
		committed bool
	}{
		{"entry-appended", true},
		{"entry-committed", true},
		{"entry-applied", true},
		{"reply-sent", true},
	} {
		t.Run(tc.failpoint, func(t *testing.T) {
			spec := &SiloSpec{DataDir: t.TempDir(), Partitions: 4, Env: []string{"ORRERY_FAILPOINT=" + tc.failpoint + ":2"}}
			silo := StartSilo(t, spec)
			c := dial(t, silo)
			lane := &orreryv1.Lane{Namespace: "crash", Queue: "q", Key: uuid.NewString()}
			partition := route.Partition(lane, c.Partitions())
			enqueue := func(id string) []*orreryv1.Mutation {
				return []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_Enqueue{Enqueue: &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{"n":1}`}}}}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, _, err := c.Batch(ctx, partition, enqueue("m1"), client.WithCommandID("c1")); err != nil {
				t.Fatalf("first command: %v\n%s", err, silo.Log())
			}
			short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
			_, _, secondErr := c.Batch(short, partition, enqueue("m2"), client.WithCommandID("c2"))
			cancelShort()
			if err := silo.Wait(30 * time.Second); err == nil {
				t.Fatalf("the silo exited cleanly; the failpoint should have killed it")
			}
			if tc.failpoint != "reply-sent" && secondErr == nil {
				t.Fatalf("the second command succeeded although the silo died at %s", tc.failpoint)
			}
			crashedAt := time.Now()

			spec.Env = nil
			silo = StartSilo(t, spec)
			c = dial(t, silo)
			msgs, _, err := c.InspectLane(ctx, lane, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			present := map[string]bool{}
			for _, m := range msgs {
				present[m.GetId()] = true
			}
			if !present["m1"] {
				t.Fatal("the first command's message is gone")
			}
			if present["m2"] != tc.committed {
				t.Fatalf("after a crash at %s the second command's message present=%v, want %v", tc.failpoint, present["m2"], tc.committed)
			}
			receipt, _, err := c.Batch(ctx, partition, enqueue("m2"), client.WithCommandID("c2"))
			if err != nil {
				t.Fatal(err)
			}
			created := receipt.GetResults()[0].GetEnqueue().GetCreated()
			loggedBeforeCrash := time.UnixMicro(receipt.GetLoggedTimeUnixMicros()).Before(crashedAt)
			if !created || loggedBeforeCrash != tc.committed {
				t.Fatalf("retry of c2: created=%v, receipt logged before the crash=%v; want created and %v", created, loggedBeforeCrash, tc.committed)
			}
		})
	}
}
