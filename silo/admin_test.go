package silo

import (
	"net/http"
	"testing"
	"time"
)

// TestPartitionTableNamesTheSilo: /v1/partitions names this silo as the host of its partitions.
func TestPartitionTableNamesTheSilo(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	eventually(t, "readyz", 20*time.Second, func() bool {
		code, _ := getJSON(t, "http://"+s.AdminAddress()+"/readyz")
		return code == http.StatusOK
	})
	code, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/partitions")
	rows, _ := body["partitions"].([]any)
	if code != http.StatusOK || len(rows) != 8 {
		t.Fatalf("partition table: %d %v", code, body)
	}
	for _, r := range rows {
		status, _ := r.(map[string]any)["status"].(map[string]any)
		if status["silo"] != s.ID() {
			t.Fatalf("partition row %v does not name silo %s", r, s.ID())
		}
	}
}
