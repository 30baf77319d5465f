package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestHistoryFileListsCronSchedules: history.jsonl has a line for each cron schedule, with its
// expression and the next ordinal read back after its cancel.
func TestHistoryFileListsCronSchedules(t *testing.T) {
	zone, err := cronZoneLocation()
	if err != nil {
		t.Fatal(err)
	}
	lane := &orreryv1.Lane{Namespace: "n", Queue: "q", Key: "c1"}
	h := history{crons: []tickSchedule{{lane: lane, id: "cron-1", partition: 5}}, cronHours: cronHours{zone: zone, first: 22},
		next: map[string]uint64{"c1": 4}, cancelledAt: map[string]time.Time{"c1": time.Unix(1_700_000_000, 0)}}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := writeHistory(path, h); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var line historyLine
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(data))), &line); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if line.Kind != "cron" || line.ID != "cron-1" || line.Expression != "*/2 * 22,1 * * *" || line.Next == nil || *line.Next != 4 {
		t.Fatalf("history line %s", data)
	}
}
