package main

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/silo"
)

// TestQuickstartPrintsOccurrencesAndTheTimeout runs the README's example against an embedded
// silo (a protoactor cluster: no -race, see the Makefile).
func TestQuickstartPrintsOccurrencesAndTheTimeout(t *testing.T) {
	var out testkit.Buffer
	if err := run(&out, "", "", 8*time.Second); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	text := out.String()
	if n := strings.Count(text, "occurrence #"); n < 2 {
		t.Fatalf("%d occurrences printed, want at least 2:\n%s", n, text)
	}
	if !strings.Contains(text, "saga timeout") {
		t.Fatalf("no saga timeout printed:\n%s", text)
	}
}

var scheduleLine = regexp.MustCompile(`configured schedule (\S+)`)

// TestASecondRunReceivesOnlyItsOwnMessages runs the example twice against one silo: the
// second run uses another namespace and receives occurrences of its own schedule only, and the
// first run's schedule was cancelled when it ended.
func TestASecondRunReceivesOnlyItsOwnMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := silo.Start(ctx, silo.Config{DataDir: t.TempDir(), Admin: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), InsecureDev: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	var outputs [2]string
	var schedules [2]string
	for i := range outputs {
		var out testkit.Buffer
		if err := run(&out, s.GossipAddress(), s.AdminAddress(), 6*time.Second); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		outputs[i] = out.String()
		m := scheduleLine.FindStringSubmatch(outputs[i])
		if m == nil || !strings.Contains(outputs[i], "cancelled schedule "+m[1]) || !strings.Contains(outputs[i], "http://"+s.AdminAddress()+"/v1/schedules/") {
			t.Fatalf("run %d printed no schedule id, admin URL or cancellation:\n%s", i, outputs[i])
		}
		schedules[i] = m[1]
	}
	if strings.Count(outputs[1], "occurrence #") < 1 {
		t.Fatalf("the second run received no occurrence:\n%s", outputs[1])
	}
	for _, line := range strings.Split(outputs[1], "\n") {
		if strings.Contains(line, "occurrence #") && !strings.Contains(line, "of schedule "+schedules[1]) {
			t.Errorf("the second run received another run's occurrence: %s", line)
		}
	}
	if strings.Count(outputs[1], "saga timeout") != 1 {
		t.Errorf("the second run received %d saga timeouts, want its own one:\n%s", strings.Count(outputs[1], "saga timeout"), outputs[1])
	}
}
