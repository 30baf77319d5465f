package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/silo"
)

// These tests start silos in-process (protoactor clusters), so they run without -race.

const testPartitions = 4

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startSilo starts a one-silo cluster on free ports in a temp data dir, waits until every
// partition answers and stops it in t.Cleanup.
func startSilo(t *testing.T, mutate ...func(*silo.Config)) *silo.Silo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := silo.Config{DataDir: t.TempDir(), Port: 0, GossipPort: 0, Admin: "127.0.0.1:0", InsecureDev: true,
		Partitions: testPartitions, Logger: quiet}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := silo.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start silo: %v", err)
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + s.AdminAddress() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("silo not ready within 20s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// result is one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI with stdin and args against the silo s (nil: no --seeds) with an empty
// environment.
func cli(t *testing.T, s *silo.Silo, stdin string, args ...string) result {
	t.Helper()
	if s != nil {
		args = append([]string{"--seeds", s.GossipAddress()}, args...)
	}
	var stdout, stderr bytes.Buffer
	code := runEnv(args, strings.NewReader(stdin), &stdout, &stderr, func(string) string { return "" })
	return result{code, stdout.String(), stderr.String()}
}

// ok runs the CLI and fails the test unless it exits 0.
func ok(t *testing.T, s *silo.Silo, stdin string, args ...string) string {
	t.Helper()
	r := cli(t, s, stdin, args...)
	if r.code != 0 {
		t.Fatalf("orrery %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// configure creates a schedule through the silo's client.
func configure(t *testing.T, s *silo.Silo, def *orreryv1.ScheduleDefinition) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().ConfigureSchedule(ctx, def, 0); err != nil {
		t.Fatalf("configure %s: %v", def.GetName(), err)
	}
}

// twoSchedules are an every-minute schedule and a Paris cron schedule in namespace, both due
// from an hour on.
func twoSchedules(namespace string) []*orreryv1.ScheduleDefinition {
	every := client.NamedSchedule(&orreryv1.Lane{Namespace: namespace, Queue: "jobs", Key: "a"}, "minutely",
		client.Every(time.Minute, time.Now().Add(time.Hour).Truncate(time.Second)), `{"job":"minutely"}`)
	every.Misfire = orreryv1.MisfirePolicy_MISFIRE_POLICY_SKIP
	cron := client.NamedSchedule(&orreryv1.Lane{Namespace: namespace, Queue: "reports", Key: "b"}, "daily",
		client.Cron("0 9 * * *", "Europe/Paris"), `{"report":"daily"}`)
	cron.GetSpec().GetCron().GapPolicy = orreryv1.CronGapPolicy_CRON_GAP_POLICY_SKIP
	return []*orreryv1.ScheduleDefinition{every, cron}
}

// listedJSON is `schedules list -o json`.
type listedJSON struct {
	Schedules []struct {
		Partition int             `json:"partition"`
		State     string          `json:"state"`
		Record    json.RawMessage `json:"record"`
	} `json:"schedules"`
	NextAfter *string `json:"next_after"`
}

// listJSON lists namespace's schedules as JSON, with their definitions decoded.
func listJSON(t *testing.T, s *silo.Silo, args ...string) (listedJSON, []*orreryv1.ScheduleRecord) {
	t.Helper()
	out := ok(t, s, "", append([]string{"-o", "json", "schedules", "list"}, args...)...)
	var doc listedJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, out)
	}
	var recs []*orreryv1.ScheduleRecord
	for _, item := range doc.Schedules {
		rec := &orreryv1.ScheduleRecord{}
		if err := protojson.Unmarshal(item.Record, rec); err != nil {
			t.Fatalf("record: %v\n%s", err, item.Record)
		}
		recs = append(recs, rec)
	}
	return doc, recs
}

// sameDefinitions fails unless got holds exactly want's definitions, in list order.
func sameDefinitions(t *testing.T, what string, got []*orreryv1.ScheduleRecord, want []*orreryv1.ScheduleDefinition) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d schedules, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i].GetDefinition(), want[i]) {
			t.Errorf("%s: schedule %d is\n%v\nwant\n%v", what, i, got[i].GetDefinition(), want[i])
		}
	}
}

// lineOf is the line of out that contains every one of parts ("" when none does).
func lineOf(out string, parts ...string) string {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

// TestSchedulesListDescribePause: list shows both schedules as a table and as JSON, describe
// shows the spec, zone, DST policy, ten next fire times and the owning partition, a paused
// schedule is listed paused (and alone under --state paused), and a triggered one's manual
// occurrence is its last outcome.
func TestSchedulesListDescribePause(t *testing.T) {
	s := startSilo(t)
	defs := twoSchedules("cli-list")
	for _, def := range defs {
		configure(t, s, def)
	}

	table := ok(t, s, "", "schedules", "list", "--namespace", "cli-list")
	for _, def := range defs {
		if lineOf(table, def.GetLane().GetQueue(), def.GetLane().GetKey(), def.GetScheduleId(), def.GetName(), "active") == "" {
			t.Errorf("list table has no active row for %s:\n%s", def.GetName(), table)
		}
	}
	if !strings.HasPrefix(table, "QUEUE") || strings.Contains(table, "next page") {
		t.Errorf("list table of one page:\n%s", table)
	}
	first := time.UnixMicro(defs[0].GetSpec().GetEvery().GetFirstDueAtUnixMicros()).UTC().Format(time.RFC3339Nano)
	if lineOf(table, defs[0].GetScheduleId(), first) == "" {
		t.Errorf("list table does not show %s's next fire time %s:\n%s", defs[0].GetName(), first, table)
	}
	doc, recs := listJSON(t, s, "--namespace", "cli-list")
	sameDefinitions(t, "list -o json", recs, defs)
	for i, item := range doc.Schedules {
		if item.State != "active" || item.Partition != client.PartitionOf(defs[i].GetLane(), testPartitions) {
			t.Errorf("list -o json: schedule %d state %q partition %d", i, item.State, item.Partition)
		}
	}
	if doc.NextAfter != nil {
		t.Errorf("list -o json: next_after %q on the only page", *doc.NextAfter)
	}

	// Pages of one: the first names the continuation that lists the second.
	page := ok(t, s, "", "schedules", "list", "--namespace", "cli-list", "--max", "1")
	token := strings.TrimPrefix(lineOf(page, "next page: --after "), "next page: --after ")
	if token == "" || lineOf(page, defs[1].GetScheduleId()) != "" {
		t.Fatalf("first page of one:\n%s", page)
	}
	if second := ok(t, s, "", "schedules", "list", "--namespace", "cli-list", "--max", "1", "--after", token); lineOf(second, defs[1].GetScheduleId()) == "" {
		t.Errorf("second page of one:\n%s", second)
	}

	cron := defs[1]
	lane := cron.GetLane()
	describeArgs := []string{"schedules", "describe", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), cron.GetScheduleId()}
	described := ok(t, s, "", describeArgs...)
	for _, want := range [][]string{
		{"spec", `cron "0 9 * * *"`}, {"zone", "Europe/Paris"}, {"dst gap", "skip"}, {"state", "active"}, {"late", "no"}, {"liveness", "ok"},
		{"partition", itoa(client.PartitionOf(lane, testPartitions))}, {"leader", s.ID()},
	} {
		if lineOf(described, want...) == "" {
			t.Errorf("describe has no line with %q:\n%s", want, described)
		}
	}
	fires := 0
	for _, line := range strings.Split(described, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "next" && f[1] == "fire" {
			at, err := time.Parse(time.RFC3339Nano, f[3])
			if err != nil || at.In(mustZone(t, "Europe/Paris")).Hour() != 9 {
				t.Errorf("next fire time %q is not 09:00 in Paris: %v", f[3], err)
			}
			fires++
		}
	}
	if fires != 10 {
		t.Errorf("describe shows %d next fire times, want 10:\n%s", fires, described)
	}
	var describedJSON struct {
		Inspection struct {
			NextFireTimes []string `json:"next_fire_times_unix_micros"`
		} `json:"inspection"`
		Partition int  `json:"partition"`
		Late      bool `json:"late"`
	}
	if err := json.Unmarshal([]byte(ok(t, s, "", append([]string{"-o", "json"}, describeArgs...)...)), &describedJSON); err != nil {
		t.Fatal(err)
	}
	if len(describedJSON.Inspection.NextFireTimes) != 10 || describedJSON.Partition != client.PartitionOf(lane, testPartitions) || describedJSON.Late {
		t.Errorf("describe -o json: %+v", describedJSON)
	}

	every := defs[0]
	if out := ok(t, s, "", "schedules", "pause", every.GetLane().GetNamespace(), every.GetLane().GetQueue(), every.GetLane().GetKey(), every.GetScheduleId()); !strings.HasPrefix(out, "paused ") {
		t.Errorf("pause printed %q", out)
	}
	table = ok(t, s, "", "schedules", "list", "--namespace", "cli-list")
	if lineOf(table, every.GetScheduleId(), "paused") == "" || lineOf(table, cron.GetScheduleId(), "active") == "" {
		t.Errorf("after pause, list:\n%s", table)
	}
	_, paused := listJSON(t, s, "--namespace", "cli-list", "--state", "paused")
	sameDefinitions(t, "list --state paused", paused, defs[:1])
	ok(t, s, "", "schedules", "resume", every.GetLane().GetNamespace(), every.GetLane().GetQueue(), every.GetLane().GetKey(), every.GetScheduleId())
	if _, paused = listJSON(t, s, "--namespace", "cli-list", "--state", "paused"); len(paused) != 0 {
		t.Errorf("after resume, %d paused schedules", len(paused))
	}

	ok(t, s, "", describeArgs[0], "trigger", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), cron.GetScheduleId())
	if described = ok(t, s, "", describeArgs...); lineOf(described, "outcome 1", "manual") == "" {
		t.Errorf("describe after trigger shows no manual outcome:\n%s", described)
	}
}

// TestSchedulesExportDeleteImport: export writes both definitions; after delete the list is
// empty and re-importing into the same cluster reports each deleted id and fails; importing
// into another cluster re-creates both with the same definitions, and importing again there
// reports them as existing without failing.
func TestSchedulesExportDeleteImport(t *testing.T) {
	s := startSilo(t)
	defs := twoSchedules("cli-export")
	for _, def := range defs {
		configure(t, s, def)
	}
	ok(t, s, "", "schedules", "pause", "cli-export", "jobs", "a", defs[0].GetScheduleId())
	exported := ok(t, s, "", "schedules", "export", "--namespace", "cli-export")
	lines := strings.Split(strings.TrimSuffix(exported, "\n"), "\n")
	if len(lines) != len(defs) {
		t.Fatalf("export wrote %d lines, want %d:\n%s", len(lines), len(defs), exported)
	}
	for i, line := range lines {
		def := &orreryv1.ScheduleDefinition{}
		if err := protojson.Unmarshal([]byte(line), def); err != nil || !proto.Equal(def, defs[i]) {
			t.Errorf("export line %d: %v\n%s\nwant %v", i, err, line, defs[i])
		}
	}

	for _, def := range defs {
		ok(t, s, "", "schedules", "delete", def.GetLane().GetNamespace(), def.GetLane().GetQueue(), def.GetLane().GetKey(), def.GetScheduleId())
	}
	if _, recs := listJSON(t, s, "--namespace", "cli-export"); len(recs) != 0 {
		t.Fatalf("after delete, %d schedules listed", len(recs))
	}
	again := cli(t, s, exported, "schedules", "import")
	if again.code != 1 || strings.Count(again.stdout, "failed ") != 2 || !strings.Contains(again.stdout, "was deleted") ||
		!strings.Contains(again.stderr, "2 of 2 definitions failed") {
		t.Errorf("import of deleted ids: exit %d\nstdout: %s\nstderr: %s", again.code, again.stdout, again.stderr)
	}

	other := startSilo(t)
	imported := ok(t, other, exported, "schedules", "import")
	for _, def := range defs {
		if lineOf(imported, "created", def.GetScheduleId()) == "" {
			t.Errorf("import did not report %s created:\n%s", def.GetName(), imported)
		}
	}
	doc, recs := listJSON(t, other, "--namespace", "cli-export")
	sameDefinitions(t, "list after import", recs, defs)
	for _, item := range doc.Schedules {
		if item.State != "active" {
			t.Errorf("imported schedule is %s, want active (a definition carries no state)", item.State)
		}
	}
	twice := ok(t, other, exported, "-o", "json", "schedules", "import")
	var outcomes struct {
		Imported []importOutcome `json:"imported"`
	}
	if err := json.Unmarshal([]byte(twice), &outcomes); err != nil {
		t.Fatal(err)
	}
	if len(outcomes.Imported) != 2 || outcomes.Imported[0].Outcome != "exists" || outcomes.Imported[1].Outcome != "exists" {
		t.Errorf("second import: %s", twice)
	}
}

// TestSagasListDescribe: a waiting saga is listed under --phase waiting, not under completed,
// and described.
func TestSagasListDescribe(t *testing.T) {
	s := startSilo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane := &orreryv1.Lane{Namespace: "cli-sagas", Queue: "orders", Key: "o1"}
	id := uuid.NewString()
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := s.Client().CompareExchangeSaga(ctx, client.WaitingSaga(lane, id, 0, `{"step":1}`, deadline, client.Timeout("orders", `{}`))); err != nil {
		t.Fatal(err)
	}
	listed := ok(t, s, "", "sagas", "list", "--namespace", "cli-sagas", "--phase", "waiting")
	if lineOf(listed, "orders", "o1", id, "waiting", deadline.UTC().Format(time.RFC3339Nano)) == "" {
		t.Errorf("sagas list:\n%s", listed)
	}
	if completed := ok(t, s, "", "sagas", "list", "--namespace", "cli-sagas", "--phase", "completed"); lineOf(completed, id) != "" {
		t.Errorf("sagas list --phase completed shows the waiting saga:\n%s", completed)
	}
	described := ok(t, s, "", "sagas", "describe", "cli-sagas", "orders", "o1", id)
	if lineOf(described, "phase", "waiting") == "" || lineOf(described, "state", `{"step":1}`) == "" ||
		lineOf(described, "partition", itoa(client.PartitionOf(lane, testPartitions))) == "" {
		t.Errorf("sagas describe:\n%s", described)
	}
}

// TestErrorsExitNonZeroNamingWhatFailed: bad flags and values exit 2 naming the flag (or
// environment variable); a missing schedule exits 1 naming the code and field.
func TestErrorsExitNonZeroNamingWhatFailed(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"schedules", "list", "--namespace", "x", "--bogus"}, "bogus"},
		{[]string{"-o", "yaml", "schedules", "list", "--namespace", "x"}, "output"},
		{[]string{"schedules", "list"}, "namespace"},
		{[]string{"schedules", "list", "--namespace", "x", "--state", "sleeping"}, "state"},
		{[]string{"schedules", "list", "--namespace", "x", "--max", "5000"}, "max"},
		{[]string{"schedules", "list", "--namespace", "x", "--after", "!!"}, "after"},
		{[]string{"sagas", "list", "--namespace", "x", "--phase", "done"}, "phase"},
		{[]string{"schedules", "describe", "x", "q"}, "NAMESPACE QUEUE KEY ID"},
		{[]string{"schedules", "frobnicate"}, "frobnicate"},
		{[]string{"partitions", "--admin"}, "admin"},
		{nil, "a command is required"},
	}
	for _, tc := range cases {
		r := cli(t, nil, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || !strings.HasPrefix(r.stderr, "orrery: ") {
			t.Errorf("orrery %q: exit %d, stderr %q; want exit 2 naming %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if r := cli(t, nil, "", "schedules", "list", "-h"); r.code != 0 || !strings.Contains(r.stderr, "-namespace") {
		t.Errorf("schedules list -h: exit %d, stderr %q", r.code, r.stderr)
	}
	var stdout, stderr bytes.Buffer
	env := map[string]string{"ORRERY_OUTPUT": "yaml"}
	if code := runEnv([]string{"schedules", "list", "--namespace", "x"}, nil, &stdout, &stderr, func(k string) string { return env[k] }); code != 2 || !strings.Contains(stderr.String(), "output") {
		t.Errorf("ORRERY_OUTPUT=yaml: exit %d, stderr %q", code, stderr.String())
	}

	s := startSilo(t)
	r := cli(t, s, "", "schedules", "describe", "cli-errors", "q", "k", uuid.NewString())
	if r.code != 1 || !strings.Contains(r.stderr, "not found: schedule_id") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("describe of a missing schedule: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, s, "", "schedules", "pause", "cli-errors", "q", "k", "no-such-name") // not a UUID: a name
	if r.code != 1 || !strings.Contains(r.stderr, `pause schedule "no-such-name" (id `+client.ScheduleID("cli-errors", "no-such-name")+"): not found") {
		t.Errorf("pause of a missing name: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestPartitionsShowsEveryPartition: the table has a row per partition led by the silo, with
// its term, voters and each replica's lag; -o json is the admin endpoint's document.
func TestPartitionsShowsEveryPartition(t *testing.T) {
	s := startSilo(t)
	siloID := cluster.FormatID(s.SiloID())
	out := ok(t, nil, "", "partitions", "--admin", "http://"+s.AdminAddress())
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for p := range testPartitions {
		// PARTITION LEADER VOTERS LEARNERS TERM APPLIED LAG ERROR
		f := rows[itoa(p)]
		if len(f) != 8 || f[1] != siloID || f[2] != siloID || f[3] != "-" || f[4] == "0" || f[6] != siloID+"=0" || f[7] != "-" {
			t.Errorf("partition %d: row %q\n%s", p, f, out)
		}
	}
	var doc struct {
		Partitions []map[string]any `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "", "-o", "json", "partitions", "--admin", s.AdminAddress())), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Partitions) != testPartitions {
		t.Errorf("partitions -o json: %d partitions, want %d", len(doc.Partitions), testPartitions)
	}
	replica, _ := doc.Partitions[0]["replica"].(map[string]any)
	if progress, _ := replica["progress"].([]any); len(progress) != 1 {
		t.Errorf("partitions -o json: replica %v, want the leader's progress of its one replica", replica)
	}
	if r := cli(t, nil, "", "partitions", "--admin", "http://127.0.0.1:1"); r.code != 1 || !strings.Contains(r.stderr, "/v1/partitions") {
		t.Errorf("partitions of no silo: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestPartitionsCheckRunsAConsistencyCheckOfEveryPartition: `partitions check` has a row per
// partition with its leader's verdict on a check it just proposed: consistent, with the one
// replica's checksum; the admin document says so too, and /v1/partitions then shows this
// replica's checksum at that index.
func TestPartitionsCheckRunsAConsistencyCheckOfEveryPartition(t *testing.T) {
	s := startSilo(t)
	out := ok(t, nil, "", "partitions", "check", "--admin", s.AdminAddress())
	for p := range testPartitions {
		// PARTITION INDEX CONSISTENT REPLICAS DIVERGENT MISSING ERROR
		f := strings.Fields(lineOf(out, itoa(p)+" "))
		if len(f) != 7 || f[1] == "-" || f[2] != "true" || f[3] != "1" || f[4] != "-" || f[5] != "-" || f[6] != "-" {
			t.Errorf("partition %d: row %q\n%s", p, f, out)
		}
	}
	var doc struct {
		Consistent bool `json:"consistent"`
		Partitions []struct {
			Check struct {
				Index     uint64 `json:"index"`
				Checksums []struct {
					Checksum string `json:"checksum"`
				} `json:"checksums"`
			} `json:"check"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "", "-o", "json", "partitions", "check", "--admin", s.AdminAddress())), &doc); err != nil {
		t.Fatal(err)
	}
	if !doc.Consistent || len(doc.Partitions) != testPartitions || len(doc.Partitions[0].Check.Checksums) != 1 {
		t.Fatalf("partitions check -o json: %+v", doc)
	}
	var table struct {
		Partitions []struct {
			Replica struct {
				Consistency struct {
					CheckedIndex uint64 `json:"checked_index"`
					Checksum     string `json:"checksum"`
				} `json:"consistency"`
			} `json:"replica"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "", "-o", "json", "partitions", "--admin", s.AdminAddress())), &table); err != nil {
		t.Fatal(err)
	}
	own := table.Partitions[0].Replica.Consistency
	if own.CheckedIndex != doc.Partitions[0].Check.Index || own.Checksum != doc.Partitions[0].Check.Checksums[0].Checksum {
		t.Fatalf("/v1/partitions shows checksum %s at %d; the check was %+v", own.Checksum, own.CheckedIndex, doc.Partitions[0].Check)
	}
}

// TestSilosShowsTheSilo: a one-silo cluster's silo is alive at its actor address and leads and
// replicates every partition.
func TestSilosShowsTheSilo(t *testing.T) {
	s := startSilo(t)
	out := ok(t, nil, "", "silos", "--admin", s.AdminAddress())
	// SILO ADDRESS LEADS REPLICAS ALIVE
	f := strings.Fields(lineOf(out, cluster.FormatID(s.SiloID())+" "))
	if len(f) != 5 || f[1] != s.ActorAddress() || f[2] != itoa(testPartitions) || f[3] != itoa(testPartitions) || f[4] != "true" {
		t.Errorf("silos: row %q\n%s", f, out)
	}
	var doc struct {
		Silos []struct {
			Self  bool `json:"self"`
			Alive bool `json:"alive"`
		} `json:"silos"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "", "-o", "json", "silos", "--admin", s.AdminAddress())), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Silos) != 1 || !doc.Silos[0].Self || !doc.Silos[0].Alive {
		t.Errorf("silos -o json: %+v", doc.Silos)
	}
}

// TestLateness: a running schedule is late once its next due instant is more than lateAfter in
// the past; a paused one or one with nothing due is not.
func TestLateness(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }
	cases := []struct {
		rec  *orreryv1.ScheduleRecord
		late bool
	}{
		{&orreryv1.ScheduleRecord{NextDueAtUnixMicros: at(-lateAfter - time.Second)}, true},
		{&orreryv1.ScheduleRecord{NextDueAtUnixMicros: at(-lateAfter)}, false},
		{&orreryv1.ScheduleRecord{NextDueAtUnixMicros: at(time.Minute)}, false},
		{&orreryv1.ScheduleRecord{NextDueAtUnixMicros: at(-time.Hour), Paused: true}, false},
		{&orreryv1.ScheduleRecord{NextDueAtUnixMicros: at(-time.Hour), Cancelled: true}, false},
		{&orreryv1.ScheduleRecord{}, false},
	}
	for i, tc := range cases {
		if late, by := lateness(tc.rec, now); late != tc.late || (late && by <= lateAfter) {
			t.Errorf("case %d: late %v by %v, want %v", i, late, by, tc.late)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
