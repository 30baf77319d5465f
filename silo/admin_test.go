package silo

import (
	"context"
	"fmt"
	"github.com/orreryhq/orrery/grains/batch"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orreryhq/orrery/actors"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/internal/testkit"
)

func waitReady(t *testing.T, s *Silo) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, "readyz", func() bool {
		code, _ := getJSON(t, "http://"+s.AdminAddress()+"/readyz")
		return code == http.StatusOK
	})
}

// TestPartitionTableNamesTheSilo: /v1/partitions names this silo as the host of its partitions,
// and shows each replica's apply version: a lone silo, every voter of its groups, raises its
// partitions to the newest version its binary knows (batch.KnownApplyVersion).
func TestPartitionTableNamesTheSilo(t *testing.T) {
	t.Parallel()
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
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
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("every partition at apply version %d", batch.KnownApplyVersion), func() bool {
		_, body := getJSON(t, "http://"+s.AdminAddress()+"/v1/partitions")
		rows, _ := body["partitions"].([]any)
		for _, r := range rows {
			if replica, _ := r.(map[string]any)["replica"].(map[string]any); replica["apply_version"] != float64(batch.KnownApplyVersion) {
				return false
			}
		}
		return len(rows) == 8
	})
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// integerKey matches the keys of integer fields, 64-bit ones included: instants, indexes,
// revisions, generations, terms, ordinals, counts.
var integerKey = regexp.MustCompile(`(_unix_micros|_index|_micros|^revision|^generation|^term|^ordinal|_count|^sequence|^watermark)$`)

// integers calls visit with the path and value of every value of an integer key (integerKey)
// in a decoded JSON document.
func integers(doc any, path string, visit func(path string, v any)) {
	switch v := doc.(type) {
	case map[string]any:
		for k, field := range v {
			if integerKey.MatchString(k) {
				if list, ok := field.([]any); ok {
					for _, item := range list {
						visit(path+"."+k+"[]", item)
					}
				} else if _, isObject := field.(map[string]any); !isObject {
					visit(path+"."+k, field)
				}
			}
			integers(field, path+"."+k, visit)
		}
	case []any:
		for _, item := range v {
			integers(item, path+"[]", visit)
		}
	}
}

// keys calls visit with the path of every object key in a decoded JSON document.
func keys(doc any, path string, visit func(path, key string)) {
	switch v := doc.(type) {
	case map[string]any:
		for k, field := range v {
			visit(path, k)
			keys(field, path+"."+k, visit)
		}
	case []any:
		for _, item := range v {
			keys(item, path+"[]", visit)
		}
	}
}

// TestAdminJSONIsSnakeCaseWithZeroesAndRFC3339Instants: every admin endpoint's keys are
// snake_case; zero fields (partition 0, a zero counter) are present; each _unix_micros
// instant has an RFC 3339 twin, and /v1/partitions shows a schedule's partition due within
// the schedule's interval; a malformed schedule or saga id is 400 naming the field, a
// well-formed one that does not exist 404.
func TestAdminJSONIsSnakeCaseWithZeroesAndRFC3339Instants(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "admin-test", Queue: "ticks", Key: "k"}
	id := uuid.NewString()
	if _, err := s.Client().ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{
		Lane: lane, ScheduleId: id, Template: &orreryv1.MessageTemplate{PayloadJson: `{}`},
		Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: (2 * time.Second).Microseconds(), FirstDueAtUnixMicros: time.Now().Add(2 * time.Second).UnixMicro()}}},
	}, 0); err != nil {
		t.Fatal(err)
	}
	admin := "http://" + s.AdminAddress()
	docs := map[string]map[string]any{}
	for _, path := range []string{"/healthz", "/readyz", "/v1/partitions", "/v1/silos", "/v1/coordinator",
		"/v1/schedules/admin-test/ticks/k/" + id, "/v1/ledger/admin-test/ticks/k/" + id, "/v1/lanes/admin-test/ticks/k"} {
		code, body := getJSON(t, admin+path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", path, code, body)
		}
		docs[path] = body
		keys(body, path, func(at, key string) {
			if !snakeCase.MatchString(key) {
				t.Errorf("%s: key %q at %s is not snake_case", path, key, at)
			}
		})
		integers(body, path, func(at string, v any) {
			if _, ok := v.(float64); !ok && v != nil {
				t.Errorf("%s: %s is %#v, want a JSON number as every integer of the admin JSON", path, at, v)
			}
		})
	}

	rows := docs["/v1/partitions"]["partitions"].([]any)
	zero := rows[0].(map[string]any)["status"].(map[string]any)
	if zero["partition"] != float64(0) || zero["pending_commands"] != float64(0) {
		t.Errorf("partition 0's status drops zero fields: %v", zero)
	}
	p := route.Partition(lane, s.Client().Partitions())
	status := rows[p].(map[string]any)["status"].(map[string]any)
	due, err := time.Parse(time.RFC3339Nano, status["next_due_at"].(string))
	if err != nil || status["next_due_at_unix_micros"] != float64(due.UnixMicro()) {
		t.Fatalf("partition %d next_due_at: %v (%v)", p, status, err)
	}
	if until := time.Until(due); until < -time.Second || until > 3*time.Second {
		t.Errorf("partition %d is due at %v, %v from now; the schedule fires every 2 s", p, due, until)
	}
	if _, err := time.Parse(time.RFC3339Nano, status["logged_time"].(string)); err != nil {
		t.Errorf("logged_time: %v", err)
	}
	record := docs["/v1/schedules/admin-test/ticks/k/"+id]
	fires := record["next_fire_times"].([]any)
	if len(fires) != 10 {
		t.Fatalf("next_fire_times %v", record)
	}
	for _, f := range fires {
		if _, err := time.Parse(time.RFC3339Nano, f.(string)); err != nil {
			t.Errorf("next_fire_times: %v", err)
		}
	}
	for _, row := range docs["/v1/coordinator"]["partitions"].([]any) {
		r := row.(map[string]any)
		if _, ok := r["next_due_at"]; !ok {
			t.Errorf("coordinator row lacks next_due_at: %v", r)
		}
		if at, ok := r["next_due_at"].(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
				t.Errorf("coordinator next_due_at %q: %v", at, err)
			}
		}
	}
	if _, ok := docs["/v1/lanes/admin-test/ticks/k"]["next_after"]; !ok {
		t.Error("the lane page lacks next_after")
	}

	for _, c := range []struct {
		path, field string
		code        int
	}{
		{"/v1/schedules/admin-test/ticks/k/not-a-uuid", "schedule_id", http.StatusBadRequest},
		{"/v1/sagas/admin-test/ticks/k/not-a-uuid", "saga_id", http.StatusBadRequest},
		{"/v1/schedules/admin-test/ticks/k/" + uuid.NewString(), "schedule_id", http.StatusNotFound},
		{"/v1/sagas/admin-test/ticks/k/" + uuid.NewString(), "saga_id", http.StatusNotFound},
	} {
		code, body := getJSON(t, admin+c.path)
		e, _ := body["error"].(map[string]any)
		if code != c.code || e["field"] != c.field {
			t.Errorf("%s: %d %v, want %d naming %s", c.path, code, body, c.code, c.field)
		}
	}
}

// recorded keeps the level and message of every record it handles.
type recorded struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorded) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorded) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorded) WithGroup(string) slog.Handler      { return r }

func (r *recorded) find(match func(slog.Record) bool) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.records {
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// TestClientCloseLogsNoError: a client that dials the silo, calls it and closes makes the
// silo log its lost connection below ERROR.
func TestClientCloseLogsNoError(t *testing.T) {
	t.Parallel()
	log := &recorded{}
	s := startSilo(t, t.TempDir(), func(c *Config) { c.Logger = slog.New(log) })
	waitReady(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{s.GossipAddress()}, Options: client.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PartitionStatus(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	lost := func(r slog.Record) bool { return r.Message == actors.EndpointLostMessage }
	testkit.Eventually(t, 20*time.Second, "the silo notices the lost connection", func() bool { return len(log.find(lost)) > 0 })
	for _, r := range log.find(func(r slog.Record) bool { return r.Level >= slog.LevelError }) {
		t.Errorf("ERROR record after a client closed: %s", r.Message)
	}
}
