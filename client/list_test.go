package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
	"github.com/orreryhq/orrery/grains/grants"
)

// TestListSchedulesFansOutOverPartitions: schedules spread over every partition of the twin
// are listed, page by page of every size, each once, in (queue, key, id) order, with the
// partition each lives in; filters by queue and state hold; the last page has no continuation.
func TestListSchedulesFansOutOverPartitions(t *testing.T) {
	b := setup(t, 4)
	ctx := ctxFor(t)
	start := time.Now().Add(time.Hour)
	var all, paused []string
	partitions := map[int]bool{}
	for n := range 12 {
		queue := []string{"jobs", "reports"}[n%2]
		l := lane(queue, fmt.Sprintf("key-%02d", n))
		id := client.ScheduleID(testNamespace, fmt.Sprintf("s-%d", n))
		if _, err := b.c.ConfigureSchedule(ctx, everySchedule(l, id, time.Minute, start), 0); err != nil {
			t.Fatal(err)
		}
		partitions[b.c.PartitionOf(l)] = true
		all = append(all, queue+"/"+l.GetKey())
		if n%3 == 0 {
			if _, err := b.c.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: l, ScheduleId: id, AnyRevision: true}); err != nil {
				t.Fatal(err)
			}
			paused = append(paused, queue+"/"+l.GetKey())
		}
		// Another namespace's schedules are never listed.
		other := &orreryv1.Lane{Namespace: "other", Queue: queue, Key: l.GetKey()}
		if _, err := b.c.ConfigureSchedule(ctx, everySchedule(other, id, time.Minute, start), 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(partitions) < 3 {
		t.Fatalf("the keys landed in only %d partitions", len(partitions))
	}
	slices.Sort(all) // (queue, key) order: the keys all have one length
	slices.Sort(paused)
	for size := 1; size <= 13; size++ {
		for _, c := range []struct {
			req  client.ListSchedulesRequest
			want []string
		}{
			{client.ListSchedulesRequest{Namespace: testNamespace}, all},
			{client.ListSchedulesRequest{Namespace: testNamespace, State: orreryv1.ScheduleState_SCHEDULE_STATE_PAUSED}, paused},
			{client.ListSchedulesRequest{Namespace: testNamespace, Queue: "reports"}, filter(all, "reports/")},
		} {
			c.req.MaxRecords = size
			var got []string
			for pages := 0; ; pages++ {
				if pages > len(c.want)+1 {
					t.Fatalf("pages of %d: more than %d pages", size, pages)
				}
				page, next, err := b.c.ListSchedules(ctx, c.req)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > size {
					t.Fatalf("page of %d holds %d", size, len(page))
				}
				for _, s := range page {
					l := s.Record.GetDefinition().GetLane()
					if s.Partition != b.c.PartitionOf(l) {
						t.Errorf("%v listed in partition %d, lives in %d", l, s.Partition, b.c.PartitionOf(l))
					}
					got = append(got, l.GetQueue()+"/"+l.GetKey())
				}
				if next == nil {
					break
				}
				c.req.After = next
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("pages of %d, queue %q state %v: %v, want %v", size, c.req.Queue, c.req.State, got, c.want)
			}
		}
	}
}

func filter(all []string, prefix string) []string {
	var out []string
	for _, s := range all {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			out = append(out, s)
		}
	}
	return out
}

// TestListSagasByPhase lists sagas over partitions by phase, and refuses a continuation of
// another partition count.
func TestListSagasByPhase(t *testing.T) {
	b, other := setup(t, 3), setup(t, 4)
	ctx := ctxFor(t)
	var waiting []string
	for n := range 6 {
		l := lane("flows", fmt.Sprintf("key-%d", n))
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		if _, err := b.c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: l, SagaId: id, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, StateJson: `{}`}); err != nil {
			t.Fatal(err)
		}
		if n%2 == 0 {
			if _, err := b.c.CompareExchangeSaga(ctx, &orreryv1.CompareExchangeSaga{Lane: l, SagaId: id, ExpectedRevision: 1, Phase: orreryv1.SagaPhase_SAGA_PHASE_COMPLETED, StateJson: `{}`}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		waiting = append(waiting, l.GetKey())
	}
	var got []string
	req := client.ListSagasRequest{Namespace: testNamespace, Phase: orreryv1.SagaPhase_SAGA_PHASE_WAITING, MaxRecords: 2}
	for {
		page, next, err := b.c.ListSagas(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			got = append(got, s.Record.GetLane().GetKey())
		}
		if next == nil {
			break
		}
		req.After = next
		if _, _, err := other.c.ListSagas(ctx, req); !errors.Is(err, orrery.ErrValidation) {
			t.Fatalf("a continuation of 3 partitions on 4: %v", err)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(waiting) {
		t.Fatalf("waiting sagas %v, want %v", got, waiting)
	}
}

// budgetRecorder is a transport that records the budget of each read it passes on.
type budgetRecorder struct {
	*clienttest.Transport
	budgets []int64
}

func (r *budgetRecorder) Inspect(ctx context.Context, partition int, req *orreryv1.InspectRequest) (*orreryv1.InspectReply, error) {
	r.budgets = append(r.budgets, req.GetBudgetMicros())
	return r.Transport.Inspect(ctx, partition, req)
}

// TestAReadCarriesItsCallersBudget: a read under a context with a deadline tells the partition
// how long its caller has left; one without a deadline carries none.
func TestAReadCarriesItsCallersBudget(t *testing.T) {
	rec := &budgetRecorder{Transport: clienttest.New(1, clienttest.WithGrants(grants.Everything(testPrincipal)))}
	c := client.New(rec, client.Options{Principal: testPrincipal})
	defer c.Close()
	lane := &orreryv1.Lane{Namespace: testNamespace, Queue: testQueue, Key: "k"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := c.InspectLane(ctx, lane, "", 10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.InspectLane(context.Background(), lane, "", 10); err != nil {
		t.Fatal(err)
	}
	if len(rec.budgets) != 2 || rec.budgets[0] <= 0 || rec.budgets[0] > (10*time.Second).Microseconds() || rec.budgets[1] != 0 {
		t.Fatalf("budgets sent %v, want about 10 s then none", rec.budgets)
	}
}
