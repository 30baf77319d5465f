package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/route"
	"github.com/orreryhq/orrery/grains/schedule/zonerules"
	"github.com/orreryhq/orrery/internal/testkit"
)

// fakeZoneinfo writes a zone database in which Europe/Berlin has UTC's rules
// (writeOtherZoneinfo) into a temp dir of the test and returns its path.
func fakeZoneinfo(t *testing.T) string {
	t.Helper()
	path, err := writeOtherZoneinfo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// zoneSchedule is one cron schedule of TestClusterOtherRulesNeverReachApply and what was
// last seen of it.
type zoneSchedule struct {
	name      string
	lane      *orreryv1.Lane
	id        string
	partition int
	revision  uint64
	next      uint64
	ids       []string          // its lane's occurrence ids, by ordinal
	ledger    map[uint64]string // its ledger: each ordinal's outcome and message
}

// otherRules is how TestClusterOtherRulesNeverReachApply gives one silo other rules than the
// others': a change of its spec before it restarts, and what it must then say about them.
type otherRules struct {
	name  string
	apply func(t *testing.T, spec *SiloSpec)
	says  func(p *SiloProcess) bool
	// seen is what another silo's GET /v1/silos must say of it.
	seen func(row SiloRow) bool
}

// TestClusterOtherRulesNeverReachApply: three silos, one restarted with other rules than the
// others: a zone database ($ZONEINFO) in which Europe/Berlin is UTC, or a binary that claims a
// newer cron evaluator version. Cron schedules in Europe/Berlin, configured on partitions
// another silo leads, some before that restart and some after: one due every 2 s under either
// rules, one due now only under the real ones. Leadership is moved by killing leaders until
// the silo with the other rules has led a partition of a schedule configured before its
// restart, and two of those partitions (at full length, until every silo has led every one).
// Under every leader every schedule is active, its revision and next ordinal never go back,
// its lane holds ordinals 0..n-1 once each and its ledger one record for each, keeping every
// id and record seen before: no occurrence lost, none doubled. Every silo checks its partitions' consistency every 2 s: replicas seen
// at the same check index hold the same state checksum, and a last check finds every
// partition consistent. The silo with the other rules says what it runs.
//
// The short form runs the "evaluator" case only: the one no other test covers (a binary of
// another build in the cluster, flagged in /v1/silos, whose evaluator version never reaches
// apply), while the unit tests of grains/schedule and grains/schedule/cron already apply and
// evaluate Europe/Berlin schedules under an empty $ZONEINFO. ORRERY_CLUSTER_FULL=1 runs the
// "zoneinfo" case too.
func TestClusterOtherRulesNeverReachApply(t *testing.T) {
	for _, c := range []otherRules{
		{
			name:  "zoneinfo",
			apply: func(t *testing.T, spec *SiloSpec) { spec.Env = append(spec.Env, "ZONEINFO="+fakeZoneinfo(t)) },
			says:  func(p *SiloProcess) bool { return strings.Contains(p.Log(), "ZONEINFO is ignored") },
			// $ZONEINFO changes nothing Orrery applies with: the same build as the others.
			seen: func(row SiloRow) bool { return !row.BuildDiffers && row.Build != nil },
		},
		{
			name: "evaluator",
			apply: func(t *testing.T, spec *SiloSpec) {
				spec.Binary = BuildSiloVariant(t, "-X github.com/orreryhq/orrery/grains/schedule/cron.evaluatorVersionAtLink=2")
			},
			says: func(p *SiloProcess) bool { return p.ReadyField("cron_evaluator") == "2" },
			seen: func(row SiloRow) bool {
				return row.BuildDiffers && row.Build != nil && strings.Contains(*row.Build, "cron 2")
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !clusterFull() && c.name != "evaluator" {
				t.Skip("the short form runs the evaluator case only; ORRERY_CLUSTER_FULL=1 runs this one too")
			}
			otherRulesNeverReachApply(t, c)
		})
	}
}

func otherRulesNeverReachApply(t *testing.T, rules otherRules) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	spec := clusterSpec()
	spec.Args = append(spec.Args, "--consistency-check-every=2s")
	cl := startReplicated(t, ctx, 3, spec)
	c := dialSeeds(t, cl.Seeds()...)
	const other = 2 // the silo with the other rules
	berlinRules, _ := zonerules.Lookup("Europe/Berlin")
	berlin, err := time.LoadLocationFromTZData("Europe/Berlin", berlinRules)
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().In(berlin).Hour()
	// Due every 2 s in this Berlin hour and the next: under UTC's rules not before the next
	// UTC hour.
	nowOnlyInBerlin := fmt.Sprintf("*/2 * %d,%d * * *", hour, (hour+1)%24)
	namespace := "zones-" + uuid.NewString()[:8]
	var schedules []*zoneSchedule
	configure := func(stage string) {
		t.Helper()
		for _, kind := range []struct{ name, expression string }{{"every-2s", "*/2 * * * * *"}, {"berlin-hour", nowOnlyInBerlin}} {
			deadline := time.Now().Add(60 * time.Second)
			for {
				if time.Now().After(deadline) {
					t.Fatalf("no partition led by a silo other than %d within 60 s: %v", other, cl.Leaders(ctx))
				}
				leaders := cl.Leaders(ctx)
				lane := &orreryv1.Lane{Namespace: namespace, Queue: "zones", Key: "k-" + uuid.NewString()}
				p := route.Partition(lane, c.Partitions())
				if leader, ok := leaders[p]; !ok || leader == other {
					continue // a partition led first by another silo
				}
				s := &zoneSchedule{name: kind.name + "/" + stage, lane: lane, id: uuid.NewString(), partition: p}
				if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: lane, ScheduleId: s.id,
					Template: &orreryv1.MessageTemplate{PayloadJson: `{}`},
					Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Cron{Cron: &orreryv1.CronSpec{
						Expression: kind.expression, TimeZone: "Europe/Berlin"}}},
				}, 0); err != nil {
					t.Fatalf("configure %s: %v", s.name, err)
				}
				t.Logf("%s: %q on partition %d, led by silo %d", s.name, kind.expression, p, leaders[p])
				schedules = append(schedules, s)
				break
			}
		}
	}
	configure("before")
	// The silo restarts with the other rules after its replicas applied the first configures.
	rules.apply(t, cl.Specs[other])
	cl.Silos[other].Kill()
	cl.Restart(t, other)
	waitRejoined(t, ctx, cl, other)
	waitReplicated(t, ctx, cl, 3, 90*time.Second)
	configure("after")

	// compared counts the pairs of replicas seen with a checksum at the same check index.
	compared := 0
	sameChecksums := func(where string) {
		t.Helper()
		for _, s := range schedules {
			byIndex := map[uint64]map[string]int{} // check index → checksum → silo index
			for i, table := range cl.Tables(ctx) {
				r := rowOf(table, s.partition)
				if r == nil || r.Consistency.Checksum == nil {
					continue
				}
				index, sum := uint64(r.Consistency.CheckedIndex), *r.Consistency.Checksum
				if byIndex[index] == nil {
					byIndex[index] = map[string]int{}
				}
				for other, j := range byIndex[index] {
					compared++
					if other != sum {
						t.Fatalf("%s: partition %d at check index %d: silo %d's state checksum %.16s…, silo %d's %.16s…", where, s.partition, index, j, other, i, sum)
					}
				}
				byIndex[index][sum] = i
			}
		}
	}

	// led[p] are the silos seen leading partition p while its schedules were checked.
	led := map[int]map[int]bool{}
	firstLed := map[int]int{}
	observe := func(when string) {
		t.Helper()
		time.Sleep(3 * time.Second) // a couple of instants under the leader checked
		leaders := cl.Leaders(ctx)
		for _, s := range schedules {
			inspect := func() *orreryv1.ScheduleRecord {
				var rec *orreryv1.ScheduleRecord
				testkit.Eventually(t, 60*time.Second, "inspect "+s.name, func() bool {
					callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					var err error
					rec, err = c.InspectSchedule(callCtx, s.lane, s.id)
					return err == nil
				})
				return rec
			}
			// readLedger reads the schedule's ledger: ordinal → outcome and message id.
			readLedger := func() map[uint64]string {
				ledger := map[uint64]string{}
				for after := []byte(nil); ; {
					records, next, err := c.ReadLedger(ctx, s.lane, s.id, client.LedgerQuery{After: after})
					if err != nil {
						t.Fatalf("%s, %s: read the ledger: %v", when, s.name, err)
					}
					for _, r := range records {
						ledger[r.GetOrdinal()] = r.GetOutcome().String() + " " + r.GetMessageId()
					}
					if next == nil {
						return ledger
					}
					after = next
				}
			}
			// The record, the lane and the ledger are three reads: they are taken from one state
			// only when no occurrence was emitted in between (the schedule fires every 2 s).
			var rec *orreryv1.ScheduleRecord
			var msgs []*orreryv1.QueueMessage
			var ledger map[uint64]string
			for attempt := 0; ; attempt++ {
				before := inspect()
				msgs = occurrences(t, ctx, c, s.lane)
				ledger = readLedger()
				rec = inspect()
				if before.GetNextOrdinal() == rec.GetNextOrdinal() {
					break
				}
				if attempt == 10 {
					t.Fatalf("%s, %s: the schedule emitted during each of 10 reads of its lane", when, s.name)
				}
			}
			leader, ok := leaders[s.partition]
			if ok {
				if led[s.partition] == nil {
					led[s.partition], firstLed[s.partition] = map[int]bool{}, leader
				}
				led[s.partition][leader] = true
			}
			where := fmt.Sprintf("%s, %s (partition %d led by silo %d)", when, s.name, s.partition, leader)
			if rec.GetSuspended() {
				t.Fatalf("%s: suspended: %s", where, rec.GetSuspendedReason())
			}
			if rec.GetRevision() < s.revision || rec.GetNextOrdinal() < s.next {
				t.Fatalf("%s: at revision %d, next ordinal %d; seen before at %d, %d", where, rec.GetRevision(), rec.GetNextOrdinal(), s.revision, s.next)
			}
			ids := make([]string, 0, len(msgs))
			for i, m := range msgs {
				if got := m.GetOccurrence().GetOrdinal(); got != uint64(i) {
					t.Fatalf("%s: the lane's %d-th message has ordinal %d (%d messages, next ordinal %d)", where, i, got, len(msgs), rec.GetNextOrdinal())
				}
				ids = append(ids, m.GetId())
			}
			if uint64(len(ids)) != rec.GetNextOrdinal() {
				t.Fatalf("%s: the lane holds %d occurrences, the schedule passed %d ordinals", where, len(ids), rec.GetNextOrdinal())
			}
			if len(ids) < len(s.ids) || !slices.Equal(ids[:len(s.ids)], s.ids) {
				t.Fatalf("%s: the lane holds %d occurrences; %d seen before, not all kept", where, len(ids), len(s.ids))
			}
			if uint64(len(ledger)) != rec.GetNextOrdinal() {
				t.Fatalf("%s: the ledger holds %d ordinals, the schedule passed %d", where, len(ledger), rec.GetNextOrdinal())
			}
			for ordinal, was := range s.ledger {
				if ledger[ordinal] != was {
					t.Fatalf("%s: ordinal %d's ledger record was %q, is %q", where, ordinal, was, ledger[ordinal])
				}
			}
			s.revision, s.next, s.ids, s.ledger = rec.GetRevision(), rec.GetNextOrdinal(), ids, ledger
		}
		sameChecksums(when)
	}
	observe("at the start")
	// Done at full length once every silo has led every partition of the schedules; in the
	// short form once silo 2 has led the partition of a schedule configured before its restart
	// and at least two of the schedules' partitions.
	done := func() bool {
		ledBefore, otherLed := false, map[int]bool{}
		for _, s := range schedules {
			silos := led[s.partition]
			if clusterFull() && len(silos) < len(cl.Silos) {
				return false
			}
			if silos[other] {
				otherLed[s.partition] = true
				ledBefore = ledBefore || strings.HasSuffix(s.name, "/before")
			}
		}
		return ledBefore && len(otherLed) >= min(2, len(led))
	}
	for round := 1; !done(); round++ {
		if round > 12 {
			t.Fatalf("after %d leader kills, leaders seen per partition of the schedules: %v", round-1, led)
		}
		// The victim: the silo leading the most of the schedules' partitions that some silo has
		// not led yet (silo 2 first).
		leaders, count := cl.Leaders(ctx), map[int]int{}
		for _, s := range schedules {
			l, ok := leaders[s.partition]
			if ok && !led[s.partition][other] && l != other {
				count[l] += 2
			} else if ok && clusterFull() && len(led[s.partition]) < len(cl.Silos) {
				count[l]++
			}
		}
		victim := -1
		for silo, n := range count {
			if victim < 0 || n > count[victim] {
				victim = silo
			}
		}
		if victim < 0 {
			victim = leaders[schedules[0].partition]
		}
		cl.Silos[victim].Kill()
		t.Logf("round %d: killed silo %d", round, victim)
		testkit.Eventually(t, 60*time.Second, "a leader for every partition of the schedules", func() bool {
			now := cl.Leaders(ctx)
			for _, s := range schedules {
				if l, ok := now[s.partition]; !ok || l == victim {
					return false
				}
			}
			return true
		})
		observe(fmt.Sprintf("round %d, silo %d killed", round, victim))
		cl.Restart(t, victim)
		waitRejoined(t, ctx, cl, victim)
		waitReplicated(t, ctx, cl, 3, 90*time.Second)
		observe(fmt.Sprintf("round %d, silo %d back", round, victim))
	}
	fired := 0
	for _, s := range schedules {
		if strings.HasPrefix(s.name, "berlin-hour") && s.next > 0 {
			fired++
		}
	}
	if fired == 0 {
		t.Fatalf("no schedule due only under Berlin's real rules fired")
	}
	t.Logf("leaders seen per partition: %v; every check consistent; %d pairs of replicas compared at the same check index", led, compared)
	if compared == 0 {
		t.Fatal("no two replicas were seen with a checksum at the same check index")
	}
	requireConsistent(t, ctx, cl)
	if !rules.says(cl.Silos[other]) {
		t.Fatalf("silo %d does not say what rules it runs:\n%s", other, cl.Silos[other].Log())
	}
	testkit.Eventually(t, 30*time.Second, "silo 0's /v1/silos row of the silo with other rules", func() bool {
		table, err := ReadSilos(ctx, cl.Silos[0].AdminAddress())
		if err != nil {
			return false
		}
		for _, row := range table.Silos {
			if row.SiloID == cl.Silos[other].SiloID() {
				return rules.seen(row)
			}
		}
		return false
	})
}
