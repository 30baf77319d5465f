package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/internal/testkit"
	"github.com/orreryhq/orrery/silo"
)

// These tests start a silo in-process (a protoactor cluster), so they run without -race.

// screenshotEnv names where TestUIPausesASchedule writes its screenshot (default: a temp dir).
const screenshotEnv = "ORRERY_UI_SCREENSHOT"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testToken is the admin token the UI tests enter in the page; its principal holds every
// capability.
const testToken = "ui-test-token"

// startSilo starts a one-silo cluster on free loopback ports in a temp data dir, with the admin
// token testToken, waits until it is ready and stops it in t.Cleanup.
func startSilo(t *testing.T, mutate ...func(*silo.Config)) *silo.Silo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := silo.Config{DataDir: t.TempDir(), Admin: "127.0.0.1:0", Partitions: 4, Logger: quiet, InsecureDev: true,
		AdminTokens: []silo.AdminToken{silo.NewAdminToken(testToken, "ui-operator")}, Grants: []*orreryv1.PutGrant{grants.Everything("ui-operator")}}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := silo.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start silo: %v", err)
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.AdminAddress() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("silo not ready within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIPausesASchedule drives headless chromium through the admin endpoint's UI: it loads a
// namespace, finds a schedule's next fire time (UTC and relative) and last outcome, checks that
// every request carries the bearer token entered in the token box, pauses the schedule with the
// page's button and checks through the client that it is paused, backfills another schedule
// from its details, writes a screenshot (to
// $ORRERY_UI_SCREENSHOT or a temp dir; the path is logged), then resumes it.
func TestUIPausesASchedule(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const namespace = "ui-test"
	nextFire := time.Now().Add(time.Hour).Truncate(time.Second)
	report := client.NamedSchedule(&orreryv1.Lane{Namespace: namespace, Queue: "reports", Key: "eu"}, "hourly-report",
		client.Every(time.Hour, nextFire), `{"report":"hourly"}`)
	heartbeatStart := time.Now().Truncate(time.Second)
	heartbeat := client.NamedSchedule(&orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "heartbeat"}, "heartbeat",
		client.Every(2*time.Second, heartbeatStart), `{"beat":true}`)
	heartbeat.MaxOccurrences = 100_000 // a bound, for the details to show
	for _, def := range []*orreryv1.ScheduleDefinition{report, heartbeat} {
		if _, err := s.Client().ConfigureSchedule(ctx, def, 0); err != nil {
			t.Fatalf("configure %s: %v", def.GetName(), err)
		}
	}
	if _, err := s.Client().TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: report.GetLane(), ScheduleId: report.GetScheduleId()}); err != nil {
		t.Fatal(err)
	}
	paused := func() bool {
		t.Helper()
		rec, err := s.Client().InspectSchedule(ctx, report.GetLane(), report.GetScheduleId())
		if err != nil {
			t.Fatal(err)
		}
		return rec.GetPaused()
	}

	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	var token string
	b.script(`return sessionStorage.getItem('orrery.token');`, &token)
	if token != "ui-test-token" {
		t.Fatalf("the token box stored %q in sessionStorage, want ui-test-token", token)
	}
	b.script(`window.sentAuthorization = [];
		const fetchFirst = window.fetch;
		window.fetch = (url, init) => { window.sentAuthorization.push(init.headers.Authorization || ''); return fetchFirst(url, init); };
		`, nil)
	b.typeInto("#namespace", namespace)
	b.click("#load")

	row := `tr[data-schedule-id="` + report.GetScheduleId() + `"]`
	wantFire := nextFire.UTC().Format("2006-01-02 15:04:05") + " UTC"
	var shown string
	b.poll("the report's next fire time "+wantFire, func() (bool, error) {
		shown = b.textOf(row + " td.next-fire")
		return strings.Contains(shown, wantFire) && strings.Contains(shown, "in "), nil
	})
	t.Logf("next fire time shown: %q", shown)
	var sent []string
	b.script(`return window.sentAuthorization;`, &sent)
	if len(sent) == 0 || slices.ContainsFunc(sent, func(h string) bool { return h != "Bearer ui-test-token" }) {
		t.Fatalf("the page sent Authorization headers %q, want every one to be \"Bearer ui-test-token\"", sent)
	}
	b.poll("the report's last outcome", func() (bool, error) {
		return strings.Contains(b.textOf(row+" td.last-outcome"), "manual"), nil
	})

	b.click(row + " button.pause")
	b.poll("the schedule paused through the client", func() (bool, error) { return paused(), nil })
	b.poll("the page showing it paused", func() (bool, error) {
		return strings.Contains(b.textOf(row+" .badge"), "paused"), nil
	})
	b.click(`tr[data-schedule-id="` + heartbeat.GetScheduleId() + `"] button.details`)
	b.poll("the heartbeat's details, with its bound", func() (bool, error) {
		details := b.textOf("tr.details-row")
		return strings.Contains(details, "Next fire times") && strings.Contains(details, "bounds: at most 100000 runs"), nil
	})
	// The details' backfill action runs the heartbeat's instants since its start now.
	b.typeInto("tr.details-row form.backfill input[name=from]", heartbeatStart.UTC().Format(time.RFC3339))
	b.click("tr.details-row form.backfill button.backfill")
	b.poll("the backfill's report", func() (bool, error) {
		status := b.textOf("#status")
		return strings.HasPrefix(status, "backfill: ") && !strings.HasPrefix(status, "backfill: 0 ") && strings.Contains(status, "heartbeat enqueued"), nil
	})
	b.poll("the heartbeat lane's depth", func() (bool, error) {
		depth := strings.TrimSuffix(b.textOf(`tr[data-lane="jobs/heartbeat"] td.depth`), "+")
		n, err := strconv.Atoi(depth)
		return err == nil && n > 0, nil
	})

	path := os.Getenv(screenshotEnv)
	if path == "" {
		path = filepath.Join(t.TempDir(), "orrery-ui.png")
	}
	b.screenshot(path)
	t.Logf("screenshot: %s", path)

	b.click(row + " button.resume")
	b.poll("the schedule resumed through the client", func() (bool, error) { return !paused(), nil })
}

// TestUIFiltersSchedulesByLabel: the schedules form's labels filter lists only the schedules
// carrying the label, and each row shows its labels.
func TestUIFiltersSchedulesByLabel(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for _, team := range []string{"billing", "search"} {
		def := client.NamedSchedule(&orreryv1.Lane{Namespace: "ui-labels", Queue: "jobs", Key: team}, team+"-report",
			client.Every(time.Hour, time.Now().Add(time.Hour)), `{}`)
		def.Labels = map[string]string{"team": team}
		// Labels need apply version 10, which the partition takes once its leader has opened.
		testkit.UntilTaken(t, 30*time.Second, "configure "+team, func() error {
			_, err := s.Client().ConfigureSchedule(ctx, def, 0)
			return err
		})
		ids = append(ids, def.GetScheduleId())
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", "ui-labels")
	b.typeInto("#labels", "team=billing")
	b.click("#load")
	billing, search := `tr[data-schedule-id="`+ids[0]+`"]`, `tr[data-schedule-id="`+ids[1]+`"]`
	b.poll("only the billing schedule, with its label", func() (bool, error) {
		return strings.Contains(b.textOf(billing), "team=billing") && b.find(search) == "", nil
	})
}

// TestUIShowsAFailingSchedule: a schedule whose lane is full keeps failing; its row shows the
// due coordinator's "failing" badge with the reason.
func TestUIShowsAFailingSchedule(t *testing.T) {
	b := startBrowser(t)
	limits := input.DefaultLimits()
	limits.MaxLaneMessages = 1
	s := startSilo(t, func(c *silo.Config) { c.Limits = limits })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ui-watch", Queue: "jobs", Key: "full"}
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "filler", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	def := client.NamedSchedule(lane, "stuck", client.Every(time.Hour, time.Now()), `{}`)
	if _, err := s.Client().ConfigureSchedule(ctx, def, 0); err != nil {
		t.Fatal(err)
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", lane.GetNamespace())
	row := `tr[data-schedule-id="` + def.GetScheduleId() + `"]`
	b.poll("the failing badge", func() (bool, error) {
		b.click("#load")
		return strings.Contains(b.textOf(row+" .badge.liveness-failing"), "failing") &&
			strings.Contains(b.textOf(row+" .liveness-reason"), "lane"), nil
	})
}

// TestUIShowsEachPartitionsConsistency: after a consistency check of every partition, the
// partitions table shows each partition's verdict: consistent, at the check's index.
func TestUIShowsEachPartitionsConsistency(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	req, err := http.NewRequest(http.MethodPost, "http://"+s.AdminAddress()+"/v1/partitions/check", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"consistent":true`) {
		t.Fatalf("POST /v1/partitions/check: %s %s", resp.Status, body)
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	for p := range 4 {
		row := `#partitions tr[data-partition="` + strconv.Itoa(p) + `"]`
		b.poll("partition "+strconv.Itoa(p)+"'s consistency", func() (bool, error) {
			b.click("#load")
			return strings.Contains(b.textOf(row), "consistent at index"), nil
		})
	}
}

// TestAdminServesTheUI: / redirects to /ui/, which serves the page and its script and style.
func TestAdminServesTheUI(t *testing.T) {
	s := startSilo(t)
	for path, want := range map[string]string{"/": "<title>Orrery</title>", "/ui/app.js": "/v1/partitions", "/ui/style.css": "font"} {
		resp, err := http.Get("http://" + s.AdminAddress() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s (final %s): %d, want 200 with %q", path, resp.Request.URL.Path, resp.StatusCode, want)
		}
		if path == "/" && resp.Request.URL.Path != "/ui/" {
			t.Errorf("GET / ended at %s, want /ui/", resp.Request.URL.Path)
		}
	}
}

// TestUIPausesAQueueAndCancelsAMessage: a lane's "pause queue" button pauses its queue on every
// partition (checked through the client's stats, with the reason typed in the prompt) and the
// row shows it paused; "resume queue" resumes it. Peeking the lane lists its messages (with a
// message's unique key), and a message's cancel button cancels it: it leaves the lane.
func TestUIPausesAQueueAndCancelsAMessage(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ui-queues", Queue: "jobs", Key: "k1"}
	for _, id := range []string{"keep", "drop"} {
		if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`, Unique: client.Unique(id+"-key", 0)}); err != nil {
			t.Fatal(err)
		}
	}
	paused := func() (reasons []string) {
		shares, err := s.Client().QueueStats(ctx, lane.GetNamespace(), lane.GetQueue(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, share := range shares {
			if p := share.Stats.GetPause(); p != nil {
				reasons = append(reasons, p.GetReason())
			}
		}
		return reasons
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", lane.GetNamespace())
	b.click("#load")
	b.typeInto("#lane-queue", lane.GetQueue())
	b.typeInto("#lane-key", lane.GetKey())
	b.click("#lane-form button[type=submit]")
	row := `tr[data-lane="jobs/k1"]:not(.messages-row)`
	b.waitFor(row + " button.queue-pause")
	b.script(`window.prompt = () => 'ui maintenance'; return null;`, nil)
	b.click(row + " button.queue-pause")
	b.poll("the queue paused on every partition through the client", func() (bool, error) {
		reasons := paused()
		return len(reasons) == 4 && reasons[0] == "ui maintenance", nil
	})
	b.poll("the row showing the queue paused", func() (bool, error) {
		return strings.Contains(b.textOf(row+" .badge.paused"), "queue paused") && b.find(row+" button.queue-resume") != "", nil
	})
	b.click(row + " button.queue-resume")
	b.poll("the queue resumed through the client", func() (bool, error) { return len(paused()) == 0, nil })
	b.click(row + " button.link")
	b.waitFor(`tr.messages-row li[data-message-id="drop"] button.cancel-message`)
	if got := b.textOf(`tr.messages-row li[data-message-id="keep"] .unique-key`); !strings.Contains(got, "unique key keep-key") {
		t.Fatalf("keep's unique key shows as %q", got)
	}
	b.click(`tr.messages-row li[data-message-id="drop"] button.cancel-message`)
	b.poll("the cancel's report", func() (bool, error) {
		return strings.HasPrefix(b.textOf("#status"), "cancel drop: removed"), nil
	})
	msgs, _, err := s.Client().InspectLane(ctx, lane, "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].GetId() != "keep" {
		t.Fatalf("the lane after the cancel: %v (%v), want only keep", msgs, err)
	}
	b.poll("the lane's messages without the cancelled one", func() (bool, error) {
		return b.find(`tr.messages-row li[data-message-id="drop"]`) == "" && b.find(`tr.messages-row li[data-message-id="keep"]`) != "", nil
	})
}

// TestUIListsCalendars: the namespace's exclusion calendars are listed, read-only, with their
// zone, what they exclude and their description.
func TestUIListsCalendars(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cal := &orreryv1.Calendar{Namespace: "ui-calendars", Name: "holidays", TimeZone: "Europe/Berlin",
		ExcludedDates: []string{"2026-12-25"}, ExcludedRanges: []*orreryv1.CalendarDateRange{{From: "2026-12-27", To: "2026-12-31"}},
		ExcludedCrons: []string{"* * 0-5 * * *"}, Description: "winter break"}
	// Calendars need apply version 17, which each partition takes once its leader has opened.
	testkit.UntilTaken(t, 30*time.Second, "put calendar", func() error { return s.Client().PutCalendar(ctx, cal) })
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", "ui-calendars")
	b.click("#load")
	b.poll("the calendar listed with its zone, exclusions and description", func() (bool, error) {
		text := b.textOf(`tr[data-calendar="holidays"]`)
		return strings.Contains(text, "Europe/Berlin") && strings.Contains(text, "2026-12-25") && strings.Contains(text, "2026-12-27..2026-12-31") &&
			strings.Contains(text, "cron * * 0-5 * * *") && strings.Contains(text, "winter break"), nil
	})
}

// TestUIShowsAMessagesPriority: a peeked lane lists each message with its priority.
func TestUIShowsAMessagesPriority(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ui-priority", Queue: "jobs", Key: "k1"}
	// Priorities need apply version 20, which each partition takes once its leader has opened.
	testkit.UntilTaken(t, 30*time.Second, "enqueue urgent", func() error {
		_, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "urgent", PayloadJson: `{}`, Priority: 8})
		return err
	})
	if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "routine", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", lane.GetNamespace())
	b.click("#load")
	b.typeInto("#lane-queue", lane.GetQueue())
	b.typeInto("#lane-key", lane.GetKey())
	b.click("#lane-form button[type=submit]")
	row := `tr[data-lane="jobs/k1"]:not(.messages-row)`
	b.waitFor(row + " button.link")
	b.click(row + " button.link")
	b.poll("the peeked messages with their priorities", func() (bool, error) {
		return strings.Contains(b.textOf(`tr.messages-row li[data-message-id="urgent"]`), "priority 8") &&
			strings.Contains(b.textOf(`tr.messages-row li[data-message-id="routine"]`), "priority 0"), nil
	})
}

// TestUIShowsAQueuesLimits: a lane of a capped queue shows the queue's cluster-wide cap and the
// leases its shares count now.
func TestUIShowsAQueuesLimits(t *testing.T) {
	b := startBrowser(t)
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "ui-limits", Queue: "jobs", Key: "k1"}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Client().SetQueueLimits(ctx, lane.GetNamespace(), lane.GetQueue(), 4, 3); err != nil {
		t.Fatal(err)
	}
	if msgs, err := s.Client().Receive(ctx, s.Client().PartitionOf(lane), &orreryv1.Receive{Namespace: lane.GetNamespace(), Queue: lane.GetQueue(), Max: 1}, 0); err != nil || len(msgs) != 1 {
		t.Fatalf("receive under the cap: %v, %v", msgs, err)
	}
	b.open("http://" + s.AdminAddress() + "/")
	b.typeInto("#token", testToken)
	b.click("#token-form button[type=submit]")
	b.typeInto("#namespace", lane.GetNamespace())
	b.click("#load")
	b.typeInto("#lane-queue", lane.GetQueue())
	b.typeInto("#lane-key", lane.GetKey())
	b.click("#lane-form button[type=submit]")
	row := `tr[data-lane="jobs/k1"]:not(.messages-row)`
	b.poll("the row showing the queue's limits", func() (bool, error) {
		return strings.Contains(b.textOf(row+" .badge.limits"), "cap 4 leased · 3/s · 1 leased now"), nil
	})
}
