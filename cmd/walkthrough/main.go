// Command walkthrough drives Orrery's deterministic core end to end on an in-memory partition
// and prints what happens: a schedule every 2 s, a saga with a 5 s deadline, the due scan a
// coordinator runs, the commands it sends back, and a worker receiving and acking. Logged time
// is simulated (it advances in steps, no waiting), so the run is instant and reproducible.
// `make walkthrough` runs it; `make run` starts a real silo.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/batch"
	"github.com/orreryhq/orrery/grains/due"
	"github.com/orreryhq/orrery/grains/grants"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/kv"
)

const (
	scheduleID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	sagaID     = "16fd2706-8baf-433b-82eb-8c7fada847da"
)

type partition struct {
	view    *kv.Memory
	applier batch.Applier
	now     int64
	seq     int
	out     io.Writer
}

// walkthroughPrincipal is who the walkthrough acts as.
const walkthroughPrincipal = "walkthrough"

// apply applies the mutations as the walkthrough's principal; when what begins with
// "coordinator:", as a due command of the due coordinators' principal (the only path of
// EmitOccurrences and ExpireSaga), and when it begins with "grant", as that principal too.
func (p *partition) apply(what string, mutations ...*orreryv1.Mutation) *orreryv1.Receipt {
	p.seq++
	principal := walkthroughPrincipal
	if strings.HasPrefix(what, "coordinator:") || strings.HasPrefix(what, "grant") {
		principal = input.CoordinatorPrincipal
	}
	b := &orreryv1.Batch{CommandId: fmt.Sprintf("cmd-%d", p.seq), Mutations: mutations}
	var receipt *orreryv1.Receipt
	var err error
	if strings.HasPrefix(what, "coordinator:") {
		receipt, err = p.applier.ApplyDue(p.view, principal, b, p.now)
	} else {
		var out *batch.Outcome
		out, err = p.applier.AsLeader(b).ApplyBatch(p.view, principal, b, p.now)
		if out != nil {
			receipt = out.Receipt
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
		os.Exit(1)
	}
	fmt.Fprintf(p.out, "%s  %-34s", stamp(p.now), what)
	for _, r := range receipt.GetResults() {
		switch {
		case r.GetError() != nil:
			fmt.Fprintf(p.out, " error=%s", r.GetError().GetCode())
		case r.GetSchedule() != nil:
			s := r.GetSchedule()
			fmt.Fprintf(p.out, " revision=%d generation=%d watermark=%d enqueued=%v", s.GetRevision(), s.GetGeneration(), s.GetNextOrdinal(), s.GetEnqueuedIds())
		case r.GetSaga() != nil:
			fmt.Fprintf(p.out, " revision=%d phase=%s %s", r.GetSaga().GetRevision(), r.GetSaga().GetPhase(), r.GetSaga().GetTimeoutMessageId())
		case r.GetReceive() != nil:
			fmt.Fprintf(p.out, " received=%d", len(r.GetReceive().GetMessages()))
		case r.GetLease() != nil:
			fmt.Fprintf(p.out, " acked=%s", r.GetLease().GetId())
		}
	}
	fmt.Fprintln(p.out)
	p.now++ // logged time strictly increases from batch to batch, as in a partition
	return receipt
}

func stamp(micros int64) string { return time.UnixMicro(micros).UTC().Format("15:04:05.000") }

func main() { walkthrough(os.Stdout) }

// walkthrough runs the walkthrough, printing to out.
func walkthrough(out io.Writer) {
	p := &partition{out: out, view: kv.NewMemory(), applier: batch.Applier{Limits: input.DefaultLimits(), ApplyVersion: batch.KnownApplyVersion}, now: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).UnixMicro()}
	jobs := &orreryv1.Lane{Namespace: "demo", Queue: "jobs", Key: "reports"}
	fmt.Fprintln(p.out, "Orrery walkthrough: the deterministic core on an in-memory partition, simulated logged time.")
	p.apply("grant walkthrough every capability", &orreryv1.Mutation{Kind: &orreryv1.Mutation_PutGrant{PutGrant: grants.Everything(walkthroughPrincipal)}})
	p.apply("configure schedule every 2s", &orreryv1.Mutation{Kind: &orreryv1.Mutation_ConfigureSchedule{ConfigureSchedule: &orreryv1.ConfigureSchedule{
		Definition: &orreryv1.ScheduleDefinition{Lane: jobs, ScheduleId: scheduleID, Template: &orreryv1.MessageTemplate{PayloadJson: `{"report":"every 2 s"}`},
			Spec: &orreryv1.ScheduleSpec{Kind: &orreryv1.ScheduleSpec_Every{Every: &orreryv1.EverySpec{IntervalMicros: 2 * input.Second, FirstDueAtUnixMicros: p.now + 2*input.Second}}}},
	}}})
	p.apply("create saga, deadline in 5s", &orreryv1.Mutation{Kind: &orreryv1.Mutation_CompareExchangeSaga{CompareExchangeSaga: &orreryv1.CompareExchangeSaga{
		Lane: jobs, SagaId: sagaID, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{"step":"awaiting-payment"}`,
		DeadlineUnixMicros: p.now + 5*input.Second, Timeout: &orreryv1.SagaTimeout{Queue: "timeouts", Template: &orreryv1.MessageTemplate{PayloadJson: `{"timeout":true}`}},
	}}})
	for range 7 {
		p.now += input.Second
		// What a due coordinator does: a bounded scan, then commands with CAS tokens.
		scan, err := due.ScanDue(p.view, p.now, due.Budget{MaxRefs: 16})
		if err != nil {
			fmt.Fprintln(os.Stderr, "scan:", err)
			os.Exit(1)
		}
		for _, ref := range scan.Refs {
			switch ref.GetKind() {
			case orreryv1.DueKind_DUE_KIND_SCHEDULE:
				p.apply("coordinator: emit occurrences", &orreryv1.Mutation{Kind: &orreryv1.Mutation_EmitOccurrences{EmitOccurrences: &orreryv1.EmitOccurrences{
					Lane: ref.GetLane(), ScheduleId: ref.GetId(), ExpectedGeneration: ref.GetToken(), Max: 32}}})
			case orreryv1.DueKind_DUE_KIND_SAGA:
				p.apply("coordinator: expire saga", &orreryv1.Mutation{Kind: &orreryv1.Mutation_ExpireSaga{ExpireSaga: &orreryv1.ExpireSaga{
					Lane: ref.GetLane(), SagaId: ref.GetId(), ExpectedRevision: ref.GetToken()}}})
			}
		}
		// What a worker does: receive with a lease, then ack with the lease token.
		for _, queue := range []string{"jobs", "timeouts"} {
			r := p.apply("worker: receive "+queue, &orreryv1.Mutation{Kind: &orreryv1.Mutation_Receive{Receive: &orreryv1.Receive{Namespace: "demo", Queue: queue, Max: 10, Owner: "worker-1"}}})
			for _, m := range r.GetResults()[0].GetReceive().GetMessages() {
				fmt.Fprintf(p.out, "%s    handle %s payload=%s\n", stamp(p.now), m.GetId(), m.GetPayloadJson())
				p.apply("worker: ack", &orreryv1.Mutation{Kind: &orreryv1.Mutation_Ack{Ack: &orreryv1.Ack{Lane: m.GetLane(), Id: m.GetId(), LeaseToken: m.GetLease().GetToken()}}})
			}
		}
	}
	fmt.Fprintln(p.out, "Done. A silo (make run) does the same on Badger, with real time and a cluster; make quickstart shows it.")
}
