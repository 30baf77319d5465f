package silo

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestAdminListsSchedulesAndSagas: GET /v1/schedules/{namespace} pages through a namespace's
// schedules across partitions (max, next_after until null), filters by queue and state and
// names each one's state and partition; GET /v1/sagas/{namespace} filters by phase; an unknown
// state or a malformed after is 400 naming it; every key is snake_case.
func TestAdminListsSchedulesAndSagas(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := time.Now().Add(time.Hour).UnixMicro()
	for n := range 5 {
		lane := &orreryv1.Lane{Namespace: "list-test", Queue: []string{"jobs", "reports"}[n%2], Key: fmt.Sprintf("k%d", n)}
		id := uuid.NewString()
		if _, err := s.Client().ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: id,
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: time.Minute.Microseconds(), FirstDueAtUnixMicros: first}}},
		}, 0); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			if _, err := s.Client().PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id, AnyRevision: true}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Client().CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: lane, SagaId: uuid.NewString(), Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`}); err != nil {
			t.Fatal(err)
		}
	}
	admin := "http://" + s.AdminAddress()
	get := func(path string) map[string]any {
		t.Helper()
		code, body := getJSON(t, admin+path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", path, code, body)
		}
		keys(body, path, func(at, key string) {
			if !snakeCase.MatchString(key) {
				t.Errorf("%s: key %q at %s is not snake_case", path, key, at)
			}
		})
		return body
	}

	var listed []string
	path := "/v1/schedules/list-test?max=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 schedules: %v", listed)
		}
		body := get(path)
		items := body["schedules"].([]any)
		if len(items) > 2 {
			t.Fatalf("%s: %d schedules", path, len(items))
		}
		for _, item := range items {
			m := item.(map[string]any)
			lane := m["record"].(map[string]any)["definition"].(map[string]any)["lane"].(map[string]any)
			listed = append(listed, lane["queue"].(string)+"/"+lane["key"].(string))
			if _, ok := m["partition"].(float64); !ok {
				t.Errorf("schedule without its partition: %v", m)
			}
		}
		next, ok := body["next_after"].(string)
		if !ok {
			if body["next_after"] != nil {
				t.Fatalf("next_after %v", body["next_after"])
			}
			break
		}
		path = "/v1/schedules/list-test?max=2&after=" + url.QueryEscape(next)
	}
	if want := "[jobs/k0 jobs/k2 jobs/k4 reports/k1 reports/k3]"; fmt.Sprint(listed) != want {
		t.Fatalf("listed %v, want %s", listed, want)
	}

	paused := get("/v1/schedules/list-test?state=paused")["schedules"].([]any)
	if len(paused) != 1 || paused[0].(map[string]any)["state"] != "paused" {
		t.Fatalf("paused schedules %v", paused)
	}
	if reports := get("/v1/schedules/list-test?queue=reports&state=active")["schedules"].([]any); len(reports) != 2 {
		t.Fatalf("active schedules of reports %v", reports)
	}
	if waiting := get("/v1/sagas/list-test?phase=waiting")["sagas"].([]any); len(waiting) != 5 || waiting[0].(map[string]any)["phase"] != "waiting" {
		t.Fatalf("waiting sagas %v", waiting)
	}
	if done := get("/v1/sagas/list-test?phase=completed")["sagas"].([]any); len(done) != 0 {
		t.Fatalf("completed sagas %v", done)
	}

	for _, c := range []struct{ path, field string }{
		{"/v1/schedules/list-test?state=sleepy", "state"},
		{"/v1/sagas/list-test?phase=unspecified", "phase"},
		{"/v1/schedules/list-test?after=!!", "after"},
		{"/v1/schedules/list-test?max=0", "max"},
	} {
		code, body := getJSON(t, admin+c.path)
		e, _ := body["error"].(map[string]any)
		if code != http.StatusBadRequest || e["field"] != c.field {
			t.Errorf("%s: %d %v, want 400 naming %s", c.path, code, body, c.field)
		}
	}
}
