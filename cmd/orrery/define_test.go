package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
)

// TestSchedulesCreateUpdateAndActByName: create defines a schedule from flags, update changes
// only what its flags give, and describe and pause take the name where the id goes.
func TestSchedulesCreateUpdateAndActByName(t *testing.T) {
	s := startSilo(t)
	id := client.ScheduleID("cli-define", "nightly")
	out := ok(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-define", "--queue", "reports",
		"--cron", "0 3 * * *", "--tz", "Europe/Paris", "--payload", `{"report":"nightly"}`, "--overlap", "skip")
	if !strings.HasPrefix(out, `created schedule "nightly" `+id+" in cli-define/reports/nightly, generation 1") {
		t.Fatalf("create printed %q", out)
	}
	if r := cli(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-define", "--queue", "reports", "--every", "1h"); r.code != 1 ||
		!strings.Contains(r.stderr, "revision_conflict") && !strings.Contains(r.stderr, "revision conflict") {
		t.Fatalf("a second create of the name: exit %d, stderr %q", r.code, r.stderr)
	}
	out = ok(t, s, "", "schedules", "update", "nightly", "--namespace", "cli-define", "--queue", "reports", "--payload", `{"report":"v2"}`)
	if !strings.Contains(out, "updated schedule") || !strings.Contains(out, "generation 2") {
		t.Fatalf("update printed %q", out)
	}
	described := ok(t, s, "", "schedules", "describe", "cli-define", "reports", "nightly", "nightly") // the name as the id
	for _, want := range [][]string{{"schedule", id}, {"spec", `cron "0 3 * * *"`}, {"zone", "Europe/Paris"}, {"overlap", "skip"}, {"generation", "2"},
		{"misfire", "catch_up (default)"}, {"dst gap", "shift (default)"}, {"catch-up window", "none: every instant already due is enqueued"}} {
		if lineOf(described, want...) == "" {
			t.Errorf("describe by name has no line with %q:\n%s", want, described)
		}
	}
	if doc := ok(t, s, "", "-o", "json", "schedules", "describe", "cli-define", "reports", "nightly", "nightly"); !strings.Contains(doc, `{\"report\":\"v2\"}`) {
		t.Errorf("describe -o json after update has not the new payload:\n%s", doc)
	}
	if out := ok(t, s, "", "schedules", "pause", "cli-define", "reports", "nightly", "nightly"); !strings.HasPrefix(out, "paused ") {
		t.Errorf("pause by name printed %q", out)
	}
	start := time.Now().Add(-10*time.Minute - 30*time.Second).UTC().Format(time.RFC3339)
	out = ok(t, s, "", "schedules", "create", "minutely", "--namespace", "cli-define", "--queue", "reports", "--every", "1m", "--start", start, "--catch-up", "5m")
	if !strings.Contains(out, "11 instants were already due, "+start) || !strings.Contains(out, "catch-up window: 5m0s") {
		t.Errorf("create starting 10.5 min back printed %q", out)
	}
	if r := cli(t, s, "", "schedules", "create", "flood", "--namespace", "cli-define", "--queue", "reports", "--every", "1m", "--start", start); r.code != 1 ||
		!strings.Contains(r.stderr, "11 instants") {
		t.Errorf("create starting 10.5 min back without a window: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{
		{"schedules", "create", "x", "--namespace", "n", "--queue", "q"},
		{"schedules", "create", "x", "--namespace", "n", "--queue", "q", "--cron", "* * * * *", "--every", "1m"},
		{"schedules", "create", "x", "--namespace", "n", "--queue", "q", "--every", "1m", "--tz", "UTC"},
		{"schedules", "create", "--namespace", "n", "--queue", "q", "--every", "1m"},
	} {
		if r := cli(t, s, "", bad...); r.code != 2 {
			t.Errorf("orrery %s: exit %d (want 2), stderr %q", strings.Join(bad, " "), r.code, r.stderr)
		}
	}
}

// TestHelpListsTheCommands: orrery help and orrery schedules help print the commands to
// stdout and exit 0; a flag set's --help prints its flags.
func TestHelpListsTheCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"schedules", "help"}} {
		r := cli(t, nil, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "schedules create NAME") {
			t.Errorf("orrery %s: exit %d, stdout %q", strings.Join(args, " "), r.code, r.stdout)
		}
	}
	if r := cli(t, nil, "", "schedules", "create", "--help"); r.code != 0 || !strings.Contains(r.stderr, "-cron") {
		t.Errorf("orrery schedules create --help: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, nil, "", "--help"); r.code != 0 || !strings.Contains(r.stderr, "schedules create NAME") || !strings.Contains(r.stderr, "-seeds") {
		t.Errorf("orrery --help: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesDeletedNameIsReused: a schedule deleted by name leaves its name free: create
// gives the name a new schedule under a new id, the commands that take a name act on that
// one, and the deleted id stays refused.
func TestSchedulesDeletedNameIsReused(t *testing.T) {
	s := startSilo(t)
	first := client.ScheduleID("cli-reuse", "nightly")
	ok(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-reuse", "--queue", "reports", "--every", "1h")
	if out := ok(t, s, "", "schedules", "delete", "cli-reuse", "reports", "nightly", "nightly"); !strings.Contains(out, first) {
		t.Fatalf("delete by name printed %q, want the first id %s", out, first)
	}
	out := ok(t, s, "", "schedules", "create", "nightly", "--namespace", "cli-reuse", "--queue", "reports", "--every", "2h")
	if !strings.HasPrefix(out, `created schedule "nightly" `) || strings.Contains(out, first) || !strings.Contains(out, "generation 1") {
		t.Fatalf("create of a deleted name printed %q, want a new id at generation 1", out)
	}
	described := ok(t, s, "", "schedules", "describe", "cli-reuse", "reports", "nightly", "nightly")
	if lineOf(described, "spec", "every 2h0m0s") == "" || lineOf(described, "schedule", first) != "" {
		t.Fatalf("describe by name after the name was reused:\n%s", described)
	}
	if out := ok(t, s, "", "schedules", "pause", "cli-reuse", "reports", "nightly", "nightly"); !strings.HasPrefix(out, "paused ") || strings.Contains(out, first) {
		t.Fatalf("pause by name printed %q, want the new schedule's id", out)
	}
	if r := cli(t, s, "", "schedules", "resume", "cli-reuse", "reports", "nightly", first); r.code != 1 || !strings.Contains(r.stderr, "was deleted") {
		t.Fatalf("resume of the deleted id: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesCreateWithBounds: --start (cron), --end and --max-runs define a schedule's
// bounds, which describe shows; a silo of this release takes them (apply version 2).
func TestSchedulesCreateWithBounds(t *testing.T) {
	s := startSilo(t)
	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Hour)
	end := start.Add(240 * time.Hour)
	ok(t, s, "", "schedules", "create", "bounded", "--namespace", "cli-bounds", "--queue", "reports",
		"--cron", "0 3 * * *", "--start", start.Format(time.RFC3339), "--end", end.Format(time.RFC3339), "--max-runs", "5")
	described := ok(t, s, "", "schedules", "describe", "cli-bounds", "reports", "bounded", "bounded")
	want := "from " + start.Format(time.RFC3339) + ", until " + end.Format(time.RFC3339) + ", at most 5 runs"
	if lineOf(described, "bounds", want) == "" {
		t.Fatalf("describe has no bounds line %q:\n%s", want, described)
	}
	if r := cli(t, s, "", "schedules", "create", "x", "--namespace", "n", "--queue", "q", "--at", start.Format(time.RFC3339), "--start", start.Format(time.RFC3339)); r.code != 2 {
		t.Errorf("--start with --at: exit %d (want 2), stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesCreateWithJitter: --jitter and --jitter-early define a schedule's jitter, which
// describe shows; --jitter-early alone is refused naming the field.
func TestSchedulesCreateWithJitter(t *testing.T) {
	s := startSilo(t)
	ok(t, s, "", "schedules", "create", "spread", "--namespace", "cli-jitter", "--queue", "reports", "--every", "1h", "--jitter", "90s", "--jitter-early")
	described := ok(t, s, "", "schedules", "describe", "cli-jitter", "reports", "spread", "spread")
	if lineOf(described, "jitter", "up to 1m30s before or after each instant") == "" {
		t.Fatalf("describe has no jitter line:\n%s", described)
	}
	if r := cli(t, s, "", "schedules", "create", "x", "--namespace", "cli-jitter", "--queue", "reports", "--every", "1h", "--jitter-early"); r.code == 0 || !strings.Contains(r.stderr, "jitter_allow_early") {
		t.Errorf("--jitter-early alone: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesCreateWithPriority: --priority is each occurrence's priority, which describe
// shows; one outside 0..9 is refused naming the field.
func TestSchedulesCreateWithPriority(t *testing.T) {
	s := startSilo(t)
	okOnceTaken(t, s, "schedules", "create", "urgent", "--namespace", "cli-priority", "--queue", "reports", "--every", "1h", "--priority", "9")
	described := ok(t, s, "", "schedules", "describe", "cli-priority", "reports", "urgent", "urgent")
	if lineOf(described, "priority", "9 (each occurrence's)") == "" {
		t.Fatalf("describe has no priority line:\n%s", described)
	}
	if r := cli(t, s, "", "schedules", "create", "x", "--namespace", "cli-priority", "--queue", "reports", "--every", "1h", "--priority", "10"); r.code == 0 || !strings.Contains(r.stderr, "template.priority") {
		t.Errorf("--priority 10: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesSkipExpired: a schedule whose first occurrence outlived its --ttl before it
// fired stops there; skip-expired passes it (its ledger says expired) and says how many; a
// second one finds none. --expired skip is shown by describe.
func TestSchedulesSkipExpired(t *testing.T) {
	s := startSilo(t)
	start := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Second)
	ok(t, s, "", "schedules", "create", "stale", "--namespace", "cli-expired", "--queue", "jobs", "--every", "1h",
		"--start", start.Format(time.RFC3339), "--ttl", "1s")
	if out := ok(t, s, "", "schedules", "skip-expired", "cli-expired", "jobs", "stale", "stale"); !strings.HasPrefix(out, "skipped 1 expired occurrences") {
		t.Fatalf("skip-expired printed %q", out)
	}
	if out := ok(t, s, "", "schedules", "skip-expired", "cli-expired", "jobs", "stale", "stale"); !strings.HasPrefix(out, "skipped 0 expired occurrences") {
		t.Fatalf("a second skip-expired printed %q", out)
	}
	described := ok(t, s, "", "schedules", "describe", "cli-expired", "jobs", "stale", "stale")
	if !strings.Contains(described, "expired") || lineOf(described, "on expiry", "stop until skip-expired") == "" {
		t.Fatalf("describe:\n%s", described)
	}
	ok(t, s, "", "schedules", "create", "lenient", "--namespace", "cli-expired", "--queue", "jobs", "--every", "1h", "--ttl", "1s", "--expired", "skip")
	if lineOf(ok(t, s, "", "schedules", "describe", "cli-expired", "jobs", "lenient", "lenient"), "on expiry", "skip") == "" {
		t.Fatal("describe does not show --expired skip")
	}
}

// TestSchedulesDescribeGenerations: an update keeps the generation it replaced; describe counts
// the kept generations and --generations lists them.
func TestSchedulesDescribeGenerations(t *testing.T) {
	s := startSilo(t)
	ok(t, s, "", "schedules", "create", "evolving", "--namespace", "cli-generations", "--queue", "jobs", "--every", "1h")
	ok(t, s, "", "schedules", "update", "evolving", "--namespace", "cli-generations", "--queue", "jobs", "--every", "2h")
	if lineOf(ok(t, s, "", "schedules", "describe", "cli-generations", "jobs", "evolving", "evolving"), "generations kept", "1 (--generations lists them)") == "" {
		t.Fatal("describe does not count the kept generation")
	}
	listed := ok(t, s, "", "schedules", "describe", "cli-generations", "jobs", "evolving", "evolving", "--generations")
	if lineOf(listed, "generation 1", "every 1h0m0s") == "" {
		t.Fatalf("describe --generations:\n%s", listed)
	}
}

// TestSchedulesBackfill: backfill runs a past range's instants now and says how many; a second
// run over the range enqueues none; --from is required.
func TestSchedulesBackfill(t *testing.T) {
	s := startSilo(t)
	first := time.Now().Add(-3*time.Hour - 30*time.Minute).UTC().Truncate(time.Second)
	ok(t, s, "", "schedules", "create", "hourly", "--namespace", "cli-backfill", "--queue", "jobs", "--every", "1h",
		"--start", first.Format(time.RFC3339), "--misfire", "skip")
	args := []string{"schedules", "backfill", "--from", first.Format(time.RFC3339), "cli-backfill", "jobs", "hourly", "hourly"}
	if out := ok(t, s, "", args...); !strings.HasPrefix(out, "backfilled 4 occurrences") {
		t.Fatalf("backfill printed %q", out)
	}
	if out := ok(t, s, "", args...); !strings.HasPrefix(out, "backfilled 0 occurrences") {
		t.Fatalf("a second backfill printed %q", out)
	}
	if r := cli(t, s, "", "schedules", "backfill", "cli-backfill", "jobs", "hourly", "hourly"); r.code != 2 {
		t.Errorf("backfill without --from: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesProcessDue: process-due emits a lane's due schedules now and says what it did
// (its figures race the silo's own due coordinator, which emits the same occurrences once), in
// text or JSON; a namespace and a partition or lane are required.
func TestSchedulesProcessDue(t *testing.T) {
	s := startSilo(t)
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	ok(t, s, "", "schedules", "create", "backlog", "--namespace", "cli-due", "--queue", "jobs", "--every", "1s",
		"--start", start.Format(time.RFC3339), "--catch-up", "1h")
	lane := []string{"--namespace", "cli-due", "--queue", "jobs", "--key", "backlog", "--max", "3"}
	if out := ok(t, s, "", append([]string{"schedules", "process-due"}, lane...)...); !strings.HasPrefix(out, "processed ") {
		t.Fatalf("process-due printed %q", out)
	}
	var done struct {
		Action    string `json:"action"`
		Schedules *int   `json:"schedules"`
		Enqueued  *int   `json:"enqueued"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", append([]string{"--output", "json", "schedules", "process-due"}, lane...)...)), &done); err != nil ||
		done.Action != "process-due" || done.Schedules == nil || done.Enqueued == nil {
		t.Fatalf("process-due --output json: %+v (%v)", done, err)
	}
	for _, args := range [][]string{
		{"schedules", "process-due", "--partition", "0"},
		{"schedules", "process-due", "--namespace", "cli-due"},
		{"schedules", "process-due", "--namespace", "cli-due", "--key", "backlog"},
		{"schedules", "process-due", "--namespace", "cli-due", "--partition", "0", "--max", "0"},
	} {
		if r := cli(t, s, "", args...); r.code != 2 {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}

// TestSchedulesLabels: --label defines a schedule's labels, describe shows them, and list
// --label and --name-prefix select by them.
func TestSchedulesLabels(t *testing.T) {
	s := startSilo(t)
	ok(t, s, "", "schedules", "create", "nightly-bill", "--namespace", "cli-labels", "--queue", "jobs", "--every", "1h", "--label", "team=billing", "--label", "tier=gold")
	ok(t, s, "", "schedules", "create", "hourly-search", "--namespace", "cli-labels", "--queue", "jobs", "--every", "1h", "--label", "team=search")
	if lineOf(ok(t, s, "", "schedules", "describe", "cli-labels", "jobs", "nightly-bill", "nightly-bill"), "labels", "team=billing,tier=gold") == "" {
		t.Fatal("describe does not show the labels")
	}
	listed := ok(t, s, "", "schedules", "list", "--namespace", "cli-labels", "--label", "team=billing")
	if !strings.Contains(listed, "nightly-bill") || strings.Contains(listed, "hourly-search") {
		t.Fatalf("list --label team=billing:\n%s", listed)
	}
	listed = ok(t, s, "", "schedules", "list", "--namespace", "cli-labels", "--label", "team", "--name-prefix", "hourly-")
	if strings.Contains(listed, "nightly-bill") || !strings.Contains(listed, "hourly-search") {
		t.Fatalf("list --label team --name-prefix hourly-:\n%s", listed)
	}
}

// TestSchedulesCreateWithAPace: --pace N/DUR paces a schedule's catch-up; describe shows the
// pace and the backlog; a malformed pace is a usage error.
func TestSchedulesCreateWithAPace(t *testing.T) {
	s := startSilo(t)
	ok(t, s, "", "schedules", "create", "paced", "--namespace", "cli-pace", "--queue", "jobs", "--every", "1h", "--pace", "10/1m")
	described := ok(t, s, "", "schedules", "describe", "cli-pace", "jobs", "paced", "paced")
	if lineOf(described, "catch-up pace", "at most 10 per 1m0s") == "" || lineOf(described, "backlog", "0") == "" {
		t.Fatalf("describe:\n%s", described)
	}
	if r := cli(t, s, "", "schedules", "create", "x", "--namespace", "cli-pace", "--queue", "jobs", "--every", "1h", "--pace", "ten"); r.code != 2 {
		t.Errorf("--pace ten: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSchedulesCreateThatPausesOnFailure: --pause-on-failure defines a schedule that pauses
// when an occurrence is dead-lettered, which describe shows.
func TestSchedulesCreateThatPausesOnFailure(t *testing.T) {
	s := startSilo(t)
	ok(t, s, "", "schedules", "create", "fragile", "--namespace", "cli-failure", "--queue", "jobs", "--every", "1h", "--pause-on-failure")
	described := ok(t, s, "", "schedules", "describe", "cli-failure", "jobs", "fragile", "fragile")
	if lineOf(described, "on failure", "pause") == "" {
		t.Fatalf("describe has no on-failure line:\n%s", described)
	}
}
