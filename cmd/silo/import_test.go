package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/chaos"
	"github.com/orreryhq/orrery/internal/oldlayout"
)

// TestImportSubcommand: the binary refuses to start on a data root of the old layout, naming
// silo import; silo import imports it, printing each partition's keys, bytes and logged time;
// a second import is refused; a silo then starts on the data root and its partitions' logged
// times are the old ones or later (they are an hour ahead of the clock).
func TestImportSubcommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	dataRoot := t.TempDir()
	ahead := time.Now().Add(time.Hour).UnixMicro()
	old := []oldlayout.Partition{
		{State: map[string]string{"zz/a": "1", "zz/b": "22"}, LoggedTimeMicros: ahead, AppliedIndex: 5},
		{State: map[string]string{"zz/c": "333"}, LoggedTimeMicros: ahead + 1, AppliedIndex: 3},
	}
	oldlayout.Write(t, dataRoot, old)
	bin := chaos.BuildSilo(t)

	out, err := exec.Command(bin, "--data", dataRoot, "--partitions", "2", "--port", "0", "--gossip-port", "0", "--admin", "off", "--insecure-dev").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "silo import --data "+dataRoot) {
		t.Fatalf("start on the old layout: %v\n%s", err, out)
	}

	out, err = exec.Command(bin, "import", "--data", dataRoot).CombinedOutput()
	if err != nil {
		t.Fatalf("silo import: %v\n%s", err, out)
	}
	for _, want := range []string{
		fmt.Sprintf("partition 0: 2 keys, 11 bytes, logged time %s (%d µs)", time.UnixMicro(ahead).UTC().Format(time.RFC3339Nano), ahead),
		fmt.Sprintf("partition 1: 1 keys, 7 bytes, logged time %s (%d µs)", time.UnixMicro(ahead+1).UTC().Format(time.RFC3339Nano), ahead+1),
		"imported 2 partitions into " + filepath.Join(dataRoot, "store"),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("silo import's output lacks %q:\n%s", want, out)
		}
	}

	out, err = exec.Command(bin, "import", "--data", dataRoot).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already has a silo store") {
		t.Fatalf("second silo import: %v\n%s", err, out)
	}

	p := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: dataRoot, Partitions: 2})
	resp, err := http.Get("http://" + p.AdminAddress() + "/v1/partitions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Partitions []struct {
			Partition int
			Error     string
			Status    struct {
				LoggedTime json.Number `json:"logged_time_unix_micros"`
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Partitions) != 2 {
		t.Fatalf("%d partitions listed, want 2", len(body.Partitions))
	}
	for _, row := range body.Partitions {
		logged, err := strconv.ParseInt(row.Status.LoggedTime.String(), 10, 64)
		if err != nil || row.Error != "" || logged < old[row.Partition].LoggedTimeMicros {
			t.Errorf("partition %d: logged time %q (%v, %q), want at least %d", row.Partition, row.Status.LoggedTime, err, row.Error, old[row.Partition].LoggedTimeMicros)
		}
	}
}
