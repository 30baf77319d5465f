package chaos

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery/internal/testkit"
)

// sampleAt is an instant of a hand-made history, seconds after a fixed start.
func sampleAt(seconds float64) time.Time {
	return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seconds * float64(time.Second)))
}

// view is a replica sample of partition 0 read at seconds.
func view(silo string, term uint64, leads bool, leader string, seconds float64) replicaSample {
	return replicaSample{Silo: silo, Partition: 0, Term: term, Leads: leads, LeaderSilo: leader, Sent: sampleAt(seconds - 0.01), Received: sampleAt(seconds)}
}

// TestOneLeaderPerTermPassesAnOrderlyHistory: leaders that follow each other in rising terms,
// an old leader still claiming its older term while the new one leads the next, followers
// that know no leader, and the same leader read many times are no violation.
func TestOneLeaderPerTermPassesAnOrderlyHistory(t *testing.T) {
	history := []replicaSample{
		view("a", 1, true, "a", 0), view("b", 1, false, "a", 0), view("c", 1, false, "", 0),
		view("a", 1, true, "a", 0.5), view("b", 1, false, "a", 0.5), view("c", 1, false, "a", 0.5),
		// a is paused; b wins term 2 while a, not yet resumed, still reports term 1.
		view("b", 2, true, "b", 5), view("c", 2, false, "b", 5), view("a", 1, true, "a", 5.2),
		view("a", 2, false, "b", 6), view("b", 2, true, "b", 6),
		// an election in term 3 that no one won, then c leads term 4.
		view("a", 3, false, "", 9), view("c", 4, true, "c", 10), view("a", 4, false, "c", 10),
		// another partition's leader in term 2 is another group's business.
		{Silo: "c", Partition: 1, Term: 2, Leads: true, LeaderSilo: "c", Received: sampleAt(6)},
	}
	got := checkOneLeaderPerTerm(history)
	if got.twoLeaders != 0 || len(got.problems) != 0 {
		t.Fatalf("an orderly history: %d terms with two leaders: %v", got.twoLeaders, got.problems)
	}
	if got.claims != 7 || got.terms != 4 {
		t.Errorf("claims %d, terms %d, want 7 claims of 4 (partition, term) pairs", got.claims, got.terms)
	}
}

// TestOneLeaderPerTermFailsTwoLeadersInATerm: two silos claiming partition 0 in term 2, even
// seconds apart, and a follower naming a leader other than the one that claimed the term,
// are each a violation, reported with their evidence.
func TestOneLeaderPerTermFailsTwoLeadersInATerm(t *testing.T) {
	history := []replicaSample{
		view("a", 1, true, "a", 0),
		view("a", 2, true, "a", 1), view("b", 2, true, "b", 3),
		view("c", 3, true, "c", 5), view("a", 3, false, "b", 5.5),
	}
	got := checkOneLeaderPerTerm(history)
	if got.twoLeaders != 2 || len(got.problems) != 2 {
		t.Fatalf("two leaders in terms 2 and 3: counted %d, problems %v", got.twoLeaders, got.problems)
	}
	for _, want := range []string{"partition 0 had 2 leaders in term 2", "silo a claimed to lead it", "silo b claimed to lead it"} {
		if !strings.Contains(got.problems[0], want) {
			t.Errorf("term 2's problem %q does not say %q", got.problems[0], want)
		}
	}
	if want := "silo a's replica named silo b its leader"; !strings.Contains(got.problems[1], want) {
		t.Errorf("term 3's problem %q does not say %q", got.problems[1], want)
	}
}

// mark is a status sample of partition p read at seconds.
func mark(p int, index uint64, loggedMicros int64, via string, seconds float64) statusSample {
	return statusSample{Via: via, Partition: p, AppliedIndex: index, LoggedTimeMicros: loggedMicros, Sent: sampleAt(seconds - 0.01), Received: sampleAt(seconds)}
}

// TestLoggedTimeNeverDecreasesPassesAnOrderlyHistory: marks read out of order, through
// different silos, repeated, with the logged time unchanged over indexes that carry none,
// and another partition's earlier logged times are no violation.
func TestLoggedTimeNeverDecreasesPassesAnOrderlyHistory(t *testing.T) {
	history := []statusSample{
		mark(0, 10, 1000, "a", 0), mark(0, 12, 1500, "b", 0.3), mark(0, 11, 1200, "a", 0.6),
		mark(0, 12, 1500, "c", 0.9), mark(0, 13, 1500, "a", 1.2), mark(0, 20, 9000, "b", 5),
		mark(1, 40, 100, "a", 0), mark(1, 41, 200, "b", 1),
	}
	got := checkLoggedTimeNeverDecreases(history)
	if got.backward != 0 || len(got.problems) != 0 {
		t.Fatalf("an orderly history: %d backward: %v", got.backward, got.problems)
	}
	if got.samples != len(history) {
		t.Errorf("samples %d, want %d", got.samples, len(history))
	}
}

// TestLoggedTimeNeverDecreasesFailsTimeGoingBack: a higher applied index carrying a lower
// logged time than a lower index did, whichever was read first and through whichever silo,
// is a violation, counted once however often it is read again.
func TestLoggedTimeNeverDecreasesFailsTimeGoingBack(t *testing.T) {
	history := []statusSample{
		mark(0, 10, 1000, "a", 0), mark(0, 11, 2000, "a", 1),
		// b's leadership stamps index 12 behind index 11's logged time; read twice.
		mark(0, 12, 1900, "b", 2), mark(0, 12, 1900, "c", 2.5),
		mark(0, 13, 2100, "b", 3),
		// read before the mark it goes back from.
		mark(1, 7, 500, "a", 0), mark(1, 5, 800, "a", 4),
	}
	got := checkLoggedTimeNeverDecreases(history)
	if got.backward != 2 || len(got.problems) != 2 {
		t.Fatalf("logged time back at partition 0 index 12 and partition 1 index 7: counted %d, problems %v", got.backward, got.problems)
	}
	for i, want := range []string{"partition 0: logged time went backward: applied index 12 carries logged time 1900",
		"partition 1: logged time went backward: applied index 7 carries logged time 500"} {
		if !strings.Contains(got.problems[i], want) {
			t.Errorf("problem %q does not say %q", got.problems[i], want)
		}
	}
	if want := "applied index 11 carried 2000"; !strings.Contains(got.problems[0], want) {
		t.Errorf("problem %q does not name the mark it went back from (%q)", got.problems[0], want)
	}
}

// TestRaftSamplesReadAPartitionTable: a partition table as GET /v1/partitions renders it
// (protojson's 64-bit integers as strings, a partition whose status read failed, one without
// a replica here) gives a replica sample per replica and a status sample per status.
func TestRaftSamplesReadAPartitionTable(t *testing.T) {
	body := `{"silo":"m1","silo_id":"00000000000000aa","owned_here":[0],"partitions":[
	 {"partition":0,"replica":{"leader_silo":"00000000000000aa","term":7,"applied_index":120,"commit_index":121,"leads":true},
	  "status":{"partition":0,"activation_epoch":"7","logged_time_unix_micros":"1767323045000001","logged_time":"2026-01-02T03:04:05.000001Z","applied_index":"120","silo":""}},
	 {"partition":1,"replica":{"leader_silo":null,"term":3,"applied_index":9,"commit_index":9,"leads":false},"error":"unavailable"},
	 {"partition":2,"replica":null,"status":{"partition":2,"activation_epoch":"2","logged_time_unix_micros":"5","applied_index":"44"}}]}`
	var table PartitionTable
	if err := json.Unmarshal([]byte(body), &table); err != nil {
		t.Fatal(err)
	}
	replicas, statuses := raftSamples(&table, sampleAt(0), sampleAt(0.1))
	wantReplicas := []replicaSample{
		{Silo: "00000000000000aa", Partition: 0, Sent: sampleAt(0), Received: sampleAt(0.1), Term: 7, Leads: true, LeaderSilo: "00000000000000aa", AppliedIndex: 120, CommitIndex: 121},
		{Silo: "00000000000000aa", Partition: 1, Sent: sampleAt(0), Received: sampleAt(0.1), Term: 3, AppliedIndex: 9, CommitIndex: 9},
	}
	wantStatuses := []statusSample{
		{Via: "00000000000000aa", Partition: 0, Sent: sampleAt(0), Received: sampleAt(0.1), ActivationEpoch: 7, AppliedIndex: 120, LoggedTimeMicros: 1767323045000001},
		{Via: "00000000000000aa", Partition: 2, Sent: sampleAt(0), Received: sampleAt(0.1), ActivationEpoch: 2, AppliedIndex: 44, LoggedTimeMicros: 5},
	}
	if !reflect.DeepEqual(replicas, wantReplicas) {
		t.Errorf("replica samples\n got %+v\nwant %+v", replicas, wantReplicas)
	}
	if !reflect.DeepEqual(statuses, wantStatuses) {
		t.Errorf("status samples\n got %+v\nwant %+v", statuses, wantStatuses)
	}
}

// TestRaftSamplerReadsEverySiloAndSkipsOneStillBeingRead: the sampler reads every address
// each round, and a silo that does not answer (paused, isolated) has one read in flight at a
// time, not one per round; stopping waits for it.
func TestRaftSamplerReadsEverySiloAndSkipsOneStillBeingRead(t *testing.T) {
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"silo_id":"aa","partitions":[{"partition":0,"replica":{"term":2,"leads":true,"leader_silo":"aa"},` +
			`"status":{"applied_index":"5","logged_time_unix_micros":"100"}}]}`))
	}))
	defer answering.Close()
	var hung atomic.Int32
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stalled.Close()
	defer close(release)
	addresses := []string{strings.TrimPrefix(answering.URL, "http://"), strings.TrimPrefix(stalled.URL, "http://")}
	// The stalled read times out after 2 s: the rounds below all fall within it.
	sampler := startRaftSampler(func() []string { return addresses }, 10*time.Millisecond, 2*time.Second)
	testkit.Eventually(t, 10*time.Second, "five reads of the silo that answers", func() bool {
		sampler.mu.Lock()
		defer sampler.mu.Unlock()
		return sampler.reads >= 5
	})
	replicas, statuses, reads, failures := sampler.stopSampling()
	if reads < 5 || len(replicas) != reads || len(statuses) != reads {
		t.Errorf("%d reads, %d replica views, %d statuses: want a view and a status per read, several reads", reads, len(replicas), len(statuses))
	}
	if got := hung.Load(); got != 1 || failures != 1 {
		t.Errorf("the silo that does not answer was read %d times (%d failed), want once, timed out", got, failures)
	}
}
