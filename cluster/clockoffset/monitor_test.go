package clockoffset

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orreryhq/orrery/clock"
	"github.com/orreryhq/orrery/internal/testkit"
)

// wallClock is a silo's wall clock in a test: the shared monotonic fake moved by an offset
// the test may change.
type wallClock struct {
	mono   *clock.Fake
	offset atomic.Int64
}

func (w *wallClock) Now() time.Time { return w.mono.Now().Add(time.Duration(w.offset.Load())) }
func (w *wallClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return w.mono.AfterFunc(d, f)
}

// sent is a probe a Monitor sent and the test has not delivered yet.
type sent struct {
	from, to, probe uint64
}

// fleet is several silos' Monitors on one fake monotonic clock, exchanging probes through the
// test: deliver answers every probe sent so far, the round trip taking rtt of the fake clock.
type fleet struct {
	t        *testing.T
	mono     *clock.Fake
	walls    map[uint64]*wallClock
	monitors map[uint64]*Monitor
	logs     map[uint64]*testkit.Buffer
	changes  map[uint64][]Fitness
	mu       sync.Mutex
	inFlight []sent
	cut      map[uint64]bool // silos whose probes and answers are lost
	// incarnations counts each silo's starts (restart adds one): its Peers incarnation.
	incarnations map[uint64]int
	bound        time.Duration
}

func newFleet(t *testing.T, bound time.Duration, offsets map[uint64]time.Duration) *fleet {
	f := &fleet{
		t: t, mono: clock.NewFake(time.Unix(1_000_000, 0)), walls: map[uint64]*wallClock{},
		monitors: map[uint64]*Monitor{}, logs: map[uint64]*testkit.Buffer{}, changes: map[uint64][]Fitness{},
		cut: map[uint64]bool{}, incarnations: map[uint64]int{}, bound: bound,
	}
	for id := range offsets {
		f.incarnations[id] = 1
	}
	for id, offset := range offsets {
		f.add(id, offset)
	}
	return f
}

// restart stops silo id's Monitor and starts a new one, a new incarnation, on a clock offset
// by offset.
func (f *fleet) restart(id uint64, offset time.Duration) {
	f.monitors[id].Stop()
	f.mu.Lock()
	f.incarnations[id]++
	f.mu.Unlock()
	f.add(id, offset)
	f.monitors[id].Start()
}

// add builds silo id's Monitor on a clock offset by offset.
func (f *fleet) add(id uint64, offset time.Duration) {
	t := f.t
	{
		w := &wallClock{mono: f.mono}
		w.offset.Store(int64(offset))
		f.walls[id] = w
		f.logs[id] = &testkit.Buffer{}
		self := id
		m, err := New(Config{
			Wall: w, Mono: f.mono, MaxOffset: f.bound,
			Peers: func() map[uint64]string {
				f.mu.Lock()
				defer f.mu.Unlock()
				peers := map[uint64]string{}
				for p, n := range f.incarnations {
					if p != self {
						peers[p] = fmt.Sprint(n)
					}
				}
				return peers
			},
			Send: func(to, probe uint64, _ time.Time) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.inFlight = append(f.inFlight, sent{self, to, probe})
			},
			OnChange: func(v Verdict) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.changes[self] = append(f.changes[self], v.Fitness)
			},
			Log: slog.New(slog.NewTextHandler(f.logs[id], nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		f.monitors[id] = m
	}
}

// start starts every Monitor: each sends its first probes.
func (f *fleet) start() {
	for _, id := range f.ids() {
		f.monitors[id].Start()
	}
	f.t.Cleanup(func() {
		for _, m := range f.monitors {
			m.Stop()
		}
	})
}

func (f *fleet) ids() []uint64 {
	var ids []uint64
	for id := range f.monitors {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// deliver answers every probe in flight: half the round trip out, the peer answers, half
// back.
func (f *fleet) deliver(rtt time.Duration) {
	f.mu.Lock()
	probes := f.inFlight
	f.inFlight = nil
	f.mu.Unlock()
	type answer struct {
		sent
		wall    time.Time
		fitness Fitness
	}
	f.mono.Advance(rtt / 2)
	var answers []answer
	for _, p := range probes {
		if f.cut[p.from] || f.cut[p.to] {
			continue
		}
		wall, fitness := f.monitors[p.to].Answer()
		answers = append(answers, answer{p, wall, fitness})
	}
	f.mono.Advance(rtt / 2)
	for _, a := range answers {
		f.monitors[a.from].Observe(a.to, a.probe, a.wall, a.fitness)
	}
}

// nextRound advances the fake clock to the next round of probes, which are sent.
func (f *fleet) nextRound() {
	at, ok := f.mono.Next()
	if !ok {
		f.t.Fatal("no round armed")
	}
	f.mono.AdvanceTo(at)
}

func (f *fleet) fitness(id uint64) Fitness { return f.monitors[id].Verdict().Fitness }

func TestAMonitorJudgesItsClockFromTheOthersAndSaysSoOnce(t *testing.T) {
	const bound = 500 * time.Millisecond
	f := newFleet(t, bound, map[uint64]time.Duration{1: 5 * time.Minute, 2: 0, 3: 100 * time.Millisecond})
	for _, id := range f.ids() {
		if got := f.fitness(id); got != Unjudged {
			t.Fatalf("silo %d before any probe: %v, want unjudged", id, got)
		}
	}
	f.start()
	f.deliver(20 * time.Millisecond)
	if got := f.fitness(1); got != Unfit {
		t.Fatalf("silo 1, 5m ahead: %v, want unfit", got)
	}
	for _, id := range []uint64{2, 3} {
		if got := f.fitness(id); got != Fit {
			t.Fatalf("silo %d: %v, want fit", id, got)
		}
	}
	v := f.monitors[1].Verdict()
	if v.Far != 2 || v.Measured != 2 || v.Largest > -5*time.Minute+50*time.Millisecond || v.Largest < -5*time.Minute-50*time.Millisecond {
		t.Fatalf("silo 1's verdict %+v: want both peers far, the largest offset about -5m", v)
	}
	est := f.monitors[2].Peers()[1]
	if d := est.Estimate.Offset - 5*time.Minute; d < -est.Estimate.Uncertainty || d > est.Estimate.Uncertainty || est.Estimate.Uncertainty != 10*time.Millisecond {
		t.Fatalf("silo 2's estimate of silo 1: %+v, want 5m ± 10ms", est.Estimate)
	}
	// The next rounds' answers carry silo 1's verdict: no peer hands it a leadership.
	f.nextRound()
	f.deliver(20 * time.Millisecond)
	if f.monitors[2].MayLead(1) || !f.monitors[2].MayLead(3) || !f.monitors[1].MayLead(2) {
		t.Fatal("silo 2 may lead on silo 1 (unfit) or not on silo 3 (fit), or silo 1 not on silo 2")
	}
	// Unfit stays unfit, said once.
	for range 3 {
		f.nextRound()
		f.deliver(20 * time.Millisecond)
	}
	if got := strings.Count(f.logs[1].String(), "level=WARN"); got != 1 {
		t.Fatalf("silo 1 logged %d WARN lines, want 1:\n%s", got, f.logs[1].String())
	}
	// Its clock is set right: fit again, said once.
	f.walls[1].offset.Store(int64(200 * time.Millisecond))
	f.nextRound()
	f.deliver(20 * time.Millisecond)
	if got := f.fitness(1); got != Fit {
		t.Fatalf("silo 1 set right: %v, want fit", got)
	}
	if got := strings.Count(f.logs[1].String(), "level=INFO"); got != 1 || !strings.Contains(f.logs[1].String(), "may lead again") {
		t.Fatalf("silo 1 logged %d INFO lines, want 1 saying it may lead again:\n%s", got, f.logs[1].String())
	}
	f.mu.Lock()
	changes := slices.Clone(f.changes[1])
	f.mu.Unlock()
	if !slices.Equal(changes, []Fitness{Unfit, Fit}) {
		t.Fatalf("silo 1's OnChange saw %v, want [unfit fit]", changes)
	}
	for _, id := range []uint64{2, 3} {
		if logs := f.logs[id].String(); logs != "" {
			t.Fatalf("silo %d, fit throughout, logged:\n%s", id, logs)
		}
	}
}

func TestARoundTripTooSlowToTellIsNoEvidence(t *testing.T) {
	// 700 ms off with a 600 ms round trip (± 300 ms): not beyond 500 ms for sure.
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 700 * time.Millisecond, 2: 0, 3: 0})
	f.start()
	f.deliver(600 * time.Millisecond)
	if got := f.fitness(1); got != Fit {
		t.Fatalf("silo 1: %v, want fit (the offset is within the uncertainty)", got)
	}
	for range 4 { // every monitor's next round
		f.nextRound()
		f.deliver(20 * time.Millisecond)
	}
	if got := f.fitness(1); got != Unfit {
		t.Fatalf("silo 1 measured precisely: %v, want unfit", got)
	}
}

func TestEstimatesAgeOutWhenProbesGoUnanswered(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: -5 * time.Minute, 2: 0, 3: 0})
	f.start()
	f.deliver(10 * time.Millisecond)
	if got := f.fitness(1); got != Unfit {
		t.Fatalf("silo 1: %v, want unfit", got)
	}
	f.cut[1] = true
	for range staleIntervals + 1 {
		f.nextRound()
		f.deliver(10 * time.Millisecond)
	}
	if got := f.fitness(1); got != Unjudged {
		t.Fatalf("silo 1 cut off: %v, want unjudged (no fresh estimate)", got)
	}
	if f.monitors[2].MayLead(1) {
		t.Fatal("silo 2 may lead on silo 1, not heard from for longer than the estimates count")
	}
	f.mu.Lock()
	pending := len(f.monitors[1].pending)
	f.mu.Unlock()
	if pending > 2*(staleIntervals+1) {
		t.Fatalf("silo 1 keeps %d probes in flight; expired ones must go", pending)
	}
}

func TestADisabledBoundJudgesFitButStillMeasures(t *testing.T) {
	f := newFleet(t, 0, map[uint64]time.Duration{1: 5 * time.Minute, 2: 0, 3: 0})
	if got := f.fitness(1); got != Fit {
		t.Fatalf("disabled, before any probe: %v, want fit", got)
	}
	f.start()
	f.deliver(10 * time.Millisecond)
	if got := f.fitness(1); got != Fit || !f.monitors[2].MayLead(1) {
		t.Fatalf("disabled: silo 1 is %v, or silo 2 may not lead on it", got)
	}
	if off := f.monitors[2].Peers()[1].Estimate.Offset; off < 4*time.Minute {
		t.Fatalf("disabled: silo 2's estimate of silo 1 is %v, want about 5m", off)
	}
}

func TestALoneSiloIsFit(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 5 * time.Minute})
	f.start()
	f.deliver(10 * time.Millisecond)
	if got := f.fitness(1); got != Fit {
		t.Fatalf("lone silo: %v, want fit", got)
	}
}

func TestAnAnswerToNoProbeIsIgnored(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 0, 2: 0, 3: 0})
	f.start()
	f.monitors[1].Observe(2, 999, f.mono.Now().Add(time.Hour), Fit)
	f.monitors[1].Observe(3, 1, f.mono.Now().Add(time.Hour), Fit) // probe 1 went to silo 2
	if len(f.monitors[1].Peers()) != 0 {
		t.Fatalf("answers to no probe of theirs were taken: %+v", f.monitors[1].Peers())
	}
}

func TestAPeerJustSeenIsProbedSoonerUntilItAnswersOrLongEnough(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 0, 2: 0})
	f.cut[2] = true // never answers: an older build
	f.start()
	gap := func() time.Duration {
		at, ok := f.mono.Next()
		if !ok {
			t.Fatal("no round armed")
		}
		return at.Sub(f.mono.Now())
	}
	if got := gap(); got != DefaultInterval/unmeasuredSpeedup {
		t.Fatalf("next round in %v, want %v while the peer just seen has not answered", got, DefaultInterval/unmeasuredSpeedup)
	}
	for f.mono.Now().Sub(time.Unix(1_000_000, 0)) < staleIntervals*DefaultInterval {
		f.nextRound()
		f.deliver(0)
	}
	if got := gap(); got != DefaultInterval {
		t.Fatalf("next round in %v, want %v once the silent peer was probed fast for long enough", got, DefaultInterval)
	}
	delete(f.cut, 2)
	f.nextRound()
	f.deliver(0)
	if got := f.fitness(1); got != Fit {
		t.Fatalf("silo 1 once silo 2 answers: %v, want fit", got)
	}
}

// TestAMonitorIsUnjudgedUntilItsFirstRound: a Monitor built while its silo sees no peer yet
// (it has not joined) neither judges nor answers that it is fit before its first round, so
// that peers hand it no leadership; its first round judges a silo still alone fit at once,
// and one that sees peers by then unjudged until they answer.
func TestAMonitorIsUnjudgedUntilItsFirstRound(t *testing.T) {
	var joined atomic.Bool
	var changes []Fitness
	var sent []uint64
	newMonitor := func() *Monitor {
		m, err := New(Config{
			Wall: clock.NewFake(time.Unix(1_000_000, 0)), Mono: clock.NewFake(time.Unix(1_000_000, 0)), MaxOffset: 500 * time.Millisecond,
			Peers: func() map[uint64]string {
				if joined.Load() {
					return map[uint64]string{2: "a", 3: "a"}
				}
				return nil
			},
			Send:     func(to, _ uint64, _ time.Time) { sent = append(sent, to) },
			OnChange: func(v Verdict) { changes = append(changes, v.Fitness) },
			Log:      slog.New(slog.NewTextHandler(&testkit.Buffer{}, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m
	}
	m := newMonitor()
	if _, fitness := m.Answer(); fitness != Unjudged || m.Verdict().Fitness != Unjudged {
		t.Fatalf("built before its silo joined: answers %v, verdict %v; want unjudged", fitness, m.Verdict().Fitness)
	}
	joined.Store(true)
	m.Start()
	if got := m.Verdict().Fitness; got != Unjudged || len(changes) != 0 || len(sent) != 2 {
		t.Fatalf("first round with two peers unmeasured: %v, changes %v, probes to %v; want unjudged, no change, two probes", got, changes, sent)
	}

	joined.Store(false)
	lone := newMonitor()
	changes = nil
	lone.Start()
	if got := lone.Verdict().Fitness; got != Fit || !slices.Equal(changes, []Fitness{Fit}) {
		t.Fatalf("a lone silo's first round: %v, changes %v; want fit, said once", got, changes)
	}
}

// TestARestartedPeerMayLeadOnlyOnItsNewAnswers: a peer judged fit that starts again (a new
// incarnation) on a clock far off is handed no leadership on its earlier answer: MayLead is
// false from the moment its new incarnation is live, an answer to a probe sent to the earlier
// incarnation is not taken, and it stays false once the new one answers unfit.
func TestARestartedPeerMayLeadOnlyOnItsNewAnswers(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 0, 2: 0, 3: 0})
	f.start()
	f.deliver(20 * time.Millisecond) // each judges itself fit
	f.nextRound()
	f.deliver(20 * time.Millisecond) // and says so
	if !f.monitors[2].MayLead(1) {
		t.Fatal("silo 1, fit, may not lead according to silo 2")
	}
	f.nextRound() // silo 2's probe to silo 1's first incarnation is in flight
	f.restart(1, 3*time.Minute)
	if f.monitors[2].MayLead(1) {
		t.Fatal("silo 1 restarted: silo 2 hands it leaderships on its earlier incarnation's answer")
	}
	f.deliver(20 * time.Millisecond) // answers, by the new incarnation, to probes sent to the earlier one among them
	if f.monitors[2].MayLead(1) {
		t.Fatal("silo 2 took an answer to a probe sent to silo 1's earlier incarnation")
	}
	for range 4 { // every monitor's next round
		f.nextRound()
		f.deliver(20 * time.Millisecond)
	}
	if got := f.fitness(1); got != Unfit {
		t.Fatalf("silo 1, restarted 3m ahead: %v, want unfit", got)
	}
	if f.monitors[2].MayLead(1) || f.monitors[3].MayLead(1) {
		t.Fatal("silo 1, restarted unfit, may lead")
	}
	if p, ok := f.monitors[2].Peers()[1]; !ok || p.Incarnation != "2" || p.Reported != Unfit {
		t.Fatalf("silo 2's record of silo 1: %+v (%v), want incarnation 2 reported unfit", p, ok)
	}
}

// TestAForgottenPeerMayNotLeadUntilItAnswersAgain: a peer judged fit whose connection is lost
// (Forget) is not measured any more, and may not lead, until it answers a later probe; a
// probe in flight to it when forgotten is not taken.
func TestAForgottenPeerMayNotLeadUntilItAnswersAgain(t *testing.T) {
	f := newFleet(t, 500*time.Millisecond, map[uint64]time.Duration{1: 0, 2: 0, 3: 0})
	f.start()
	f.deliver(20 * time.Millisecond)
	f.nextRound()
	f.deliver(20 * time.Millisecond)
	if !f.monitors[2].MayLead(1) {
		t.Fatal("silo 1, fit, may not lead according to silo 2")
	}
	inFlight := func() bool {
		m := f.monitors[2]
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range m.pending {
			if p.to == 1 {
				return true
			}
		}
		return false
	}
	for !inFlight() { // silo 2's next round: a probe to silo 1 in flight
		f.nextRound()
	}
	f.monitors[2].Forget(1)
	if _, ok := f.monitors[2].Peers()[1]; ok || f.monitors[2].MayLead(1) {
		t.Fatal("silo 2 still counts silo 1's estimate after forgetting it")
	}
	f.deliver(20 * time.Millisecond)
	if f.monitors[2].MayLead(1) {
		t.Fatal("silo 2 took an answer to a probe sent before it forgot silo 1")
	}
	for range 4 {
		f.nextRound()
		f.deliver(20 * time.Millisecond)
	}
	if !f.monitors[2].MayLead(1) {
		t.Fatal("silo 1 answered again, fit, and still may not lead")
	}
}
