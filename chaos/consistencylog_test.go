package chaos

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery/partition"
)

// TestLoggedInconsistenciesAreViolations: a hand-made pair of silo logs in which a partition's
// leader logged a divergent replica (twice, as after a repeated check, and once more by a
// later leader at another index) yields one violation per replica and index, naming them;
// other ERROR lines are no inconsistency.
func TestLoggedInconsistenciesAreViolations(t *testing.T) {
	line := func(partitionN, index, replica string) string {
		return `time=2026-12-07T06:00:00.000Z level=ERROR msg="` + partition.InconsistencyMessage + `" silo_id=aa partition=` + partitionN +
			` index=` + index + ` replica=` + replica + ` checksum=1234 majority=abcd replicas="aa:abcd bb:abcd cc:1234" missing=[] repaired=true`
	}
	logs := map[string]string{
		"silo aa (pid 1)": strings.Join([]string{
			`time=2026-12-07T06:00:00.000Z level=INFO msg="silo leads partitions" count=2`,
			line("3", "120", "cc"),
			line("3", "120", "cc"),
			`time=2026-12-07T06:00:01.000Z level=ERROR msg="rebuild of a divergent replica failed; giving up until a check finds it again" partition=3`,
		}, "\n"),
		"silo bb (pid 2)": line("3", "240", "cc") + "\n",
	}
	got := inconsistenciesLogged(logs)
	if len(got) != 2 {
		t.Fatalf("got %d violations, want 2 (replica cc of partition 3 at indexes 120 and 240):\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{"partition 3 at index 120: replica cc diverged", "partition 3 at index 240: replica cc diverged"} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("violation %d: %q, want it to begin %q", i, got[i], want)
		}
	}
	if got := inconsistenciesLogged(map[string]string{"silo aa (pid 1)": logs["silo aa (pid 1)"][:100]}); len(got) != 0 {
		t.Fatalf("a log with no inconsistency line: %v", got)
	}
}
