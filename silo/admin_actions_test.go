package silo

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// post sends a POST with the given headers and decodes the JSON answer.
func post(t *testing.T, url string, header map[string]string) (int, map[string]any) {
	t.Helper()
	return send(t, http.MethodPost, url, "", header)
}

// TestAdminPausesResumesAndTriggersSchedules: POST …/pause, …/resume and …/trigger act on a
// schedule at whatever revision it is and answer its result; pausing a paused schedule is an
// error, a malformed id 400 naming it; a cross-origin POST is 403 and changes nothing.
func TestAdminPausesResumesAndTriggersSchedules(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "actions-test", Queue: "jobs", Key: "k"}
	id := uuid.NewString()
	if _, err := s.Client().ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Minute.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(time.Hour).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.AdminAddress() + "/v1/schedules/actions-test/jobs/k/" + id + "/"
	paused := func() bool {
		t.Helper()
		rec, err := s.Client().InspectSchedule(ctx, lane, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.GetPaused()
	}

	if code, body := post(t, base+"pause", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden || paused() {
		t.Fatalf("cross-origin pause: %d %v, paused %v; want 403 and not paused", code, body, paused())
	}
	if code, body := post(t, base+"pause", nil); code != http.StatusOK || body["revision"] == nil || !paused() {
		t.Fatalf("pause: %d %v, paused %v", code, body, paused())
	}
	if code, body := post(t, base+"pause", nil); code == http.StatusOK {
		t.Fatalf("pause of a paused schedule: %d %v, want an error", code, body)
	}
	if code, body := post(t, base+"resume", nil); code != http.StatusOK || paused() {
		t.Fatalf("resume: %d %v, paused %v", code, body, paused())
	}
	if code, body := post(t, base+"trigger", nil); code != http.StatusOK {
		t.Fatalf("trigger: %d %v", code, body)
	}
	insp, err := s.Client().ScheduleInspection(ctx, lane, id)
	if err != nil {
		t.Fatal(err)
	}
	if outs := insp.GetLastOutcomes(); len(outs) == 0 || outs[0].GetOutcome() != orreryv1.LedgerOutcome_LEDGER_OUTCOME_MANUAL {
		t.Fatalf("after trigger the last outcomes are %v, want a MANUAL one first", outs)
	}
	code, body := post(t, "http://"+s.AdminAddress()+"/v1/schedules/actions-test/jobs/k/not-a-uuid/pause", nil)
	if field, _ := body["error"].(map[string]any)["field"].(string); code != http.StatusBadRequest || !strings.Contains(field, "schedule_id") {
		t.Fatalf("malformed id: %d %v, want 400 naming schedule_id", code, body)
	}
}

// TestAdminSkipsExpiredOccurrences: POST …/skip-expired passes the expired occurrence a
// schedule stopped at and answers how many it passed.
func TestAdminSkipsExpiredOccurrences(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "actions-test", Queue: "jobs", Key: "stale"}
	id := uuid.NewString()
	if _, err := s.Client().ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
		Spec:     &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Hour.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(-30 * time.Minute).UnixMicro()}}},
		Template: &orreryv1.MessageTemplate{TimeToLiveMicros: time.Second.Microseconds()},
	}, 0); err != nil {
		t.Fatal(err)
	}
	code, body := post(t, "http://"+s.AdminAddress()+"/v1/schedules/actions-test/jobs/stale/"+id+"/skip-expired", nil)
	if code != http.StatusOK || body["passed_without_message"] != float64(1) {
		t.Fatalf("skip-expired: %d %v, want 200 and 1 passed", code, body)
	}
	rec, err := s.Client().InspectSchedule(ctx, lane, id)
	if err != nil || rec.GetNextOrdinal() != 1 {
		t.Fatalf("after skip-expired: %v (%v), want the watermark at 1", rec, err)
	}
}

// TestAdminPausesAndResumesAQueue: POST /v1/queues/{ns}/{queue}/pause pauses the queue on every
// partition (GET /v1/queues/{ns}/{queue} shows the pause and its reason on each), receives lease
// nothing meanwhile, and …/resume ends it. POST …/messages/{id}/cancel cancels a message and
// answers its outcome; an unknown id is 404 naming the field.
func TestAdminPausesAndResumesAQueue(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "queue-actions", Queue: "jobs", Key: "k"}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Client().Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: id, PayloadJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + s.AdminAddress() + "/v1/queues/queue-actions/jobs"
	if code, body := post(t, base+"/pause?reason=maintenance", nil); code != http.StatusOK || body["paused"] != true {
		t.Fatalf("pause: %d %v", code, body)
	}
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Partitions []struct {
			Stats struct {
				Pause *struct {
					Reason string `json:"reason"`
				} `json:"pause"`
			} `json:"stats"`
		} `json:"partitions"`
		PausedPartitions int `json:"paused_partitions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&stats)
	resp.Body.Close()
	if err != nil || stats.PausedPartitions != len(stats.Partitions) || stats.PausedPartitions == 0 || stats.Partitions[0].Stats.Pause.Reason != "maintenance" {
		t.Fatalf("queue stats after the pause: %+v (%v)", stats, err)
	}
	partition := s.Client().PartitionOf(lane)
	receive := &orreryv1.Receive{Namespace: "queue-actions", Queue: "jobs", Max: 10}
	if msgs, err := s.Client().Receive(ctx, partition, receive, 0); err != nil || len(msgs) != 0 {
		t.Fatalf("receive while paused: %d messages (%v)", len(msgs), err)
	}
	if code, body := post(t, base+"/resume", nil); code != http.StatusOK || body["paused"] != false {
		t.Fatalf("resume: %d %v", code, body)
	}
	if code, body := post(t, "http://"+s.AdminAddress()+"/v1/lanes/queue-actions/jobs/k/messages/a/cancel", nil); code != http.StatusOK || body["outcome"] != "CANCEL_OUTCOME_REMOVED" {
		t.Fatalf("cancel a: %d %v", code, body)
	}
	if msgs, err := s.Client().Receive(ctx, partition, receive, 0); err != nil || len(msgs) != 1 || msgs[0].GetId() != "b" {
		t.Fatalf("receive after the resume and the cancel: %v (%v), want b", msgs, err)
	}
	code, body := post(t, "http://"+s.AdminAddress()+"/v1/lanes/queue-actions/jobs/k/messages/nope/cancel", nil)
	if e, _ := body["error"].(map[string]any); code != http.StatusNotFound || !strings.HasSuffix(e["field"].(string), "id") {
		t.Fatalf("cancel of an unknown id: %d %v", code, body)
	}
}

// TestAdminProcessesDueSchedules: POST /v1/schedules/{ns}/process-due emits a lane's due
// schedules now and answers what it did; without a partition or a lane it is refused, naming
// the partition.
func TestAdminProcessesDueSchedules(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "due-test", Queue: "jobs", Key: "backlog"}
	if _, err := s.Client().ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: uuid.NewString(),
		Spec:                &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Second.Microseconds(), FirstDueAtUnixMicros: time.Now().Add(-time.Hour).UnixMicro()}}},
		CatchUpWindowMicros: time.Hour.Microseconds(),
	}, 0); err != nil {
		t.Fatal(err)
	}
	code, body := post(t, "http://"+s.AdminAddress()+"/v1/schedules/due-test/process-due?queue=jobs&key=backlog&max=2", nil)
	if _, ok := body["enqueued"].(float64); code != http.StatusOK || !ok || body["failed"] == nil {
		t.Fatalf("process-due: %d %v, want 200 with what it did", code, body)
	}
	code, body = post(t, "http://"+s.AdminAddress()+"/v1/schedules/due-test/process-due", nil)
	if field, _ := body["error"].(map[string]any)["field"].(string); code != http.StatusBadRequest || field != "partition" {
		t.Fatalf("process-due without a partition or lane: %d %v, want 400 naming partition", code, body)
	}
}
