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

// TestHistoryFileListsScheduleCalls: history.jsonl has a line for each schedule call, with
// its expected revision (a compare-and-set's), outcome and revision, and what a read found.
func TestHistoryFileListsScheduleCalls(t *testing.T) {
	f := newScheduleFixture()
	h := history{scheduleOps: f.h.scheduleOps[4:6]} // a read of the paused schedule, a pause refused
	h.scheduleOps[0].paused = true
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := writeHistory(path, h); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("history %s; want 2 lines", data)
	}
	var read, refused historyLine
	if err := json.Unmarshal([]byte(lines[0]), &read); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &refused); err != nil {
		t.Fatal(err)
	}
	if read.Kind != "schedule_call" || read.ID != scheduleEmitting || read.Op != "read" || read.Expected != nil || read.Revision != 4 || read.State != "paused" || read.Returned == nil {
		t.Errorf("read line %s", lines[0])
	}
	if refused.Op != "pause" || refused.Expected == nil || *refused.Expected != 4 || refused.Outcome != "failed" || refused.State != "" {
		t.Errorf("refused pause line %s", lines[1])
	}
}
