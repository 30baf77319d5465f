package silo

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster"
	"github.com/orreryhq/orrery/grains/duecoordinator"
	"github.com/orreryhq/orrery/grains/engine"
	"github.com/orreryhq/orrery/partition"
	"github.com/orreryhq/orrery/silo/ui"
)

// adminHandler serves, on loopback by default:
//
//	GET /healthz                                        200 while the process serves
//	GET /readyz                                         200 when every owned partition answers
//	GET /metrics                                        Prometheus metrics (siloMetrics)
//	GET /v1/partitions                                  the partition table: owner and status
//	POST /v1/partitions/check                           a consistency check of every partition now: each
//	                                                    leader's verdict (consistent, divergent and
//	                                                    missing replicas, checksums)
//	GET /v1/silos                                       the silos: address, alive, partitions led, replicas,
//	                                                    build (zone rules, cron evaluator) and whether it
//	                                                    differs from this silo's, clock offset from this
//	                                                    silo's and clock fitness; this silo's clock verdict
//	GET /v1/coordinator                                 the due coordinator's counters and late or failing records
//	GET /v1/schedules/{namespace}/{queue}/{key}/{id}    a schedule: record, next 10 fire times, last 10 outcomes, liveness
//	GET /v1/ledger/{namespace}/{queue}/{key}/{id}?from=&to=&max=&after=
//	                                                    a schedule's occurrence ledger (RFC 3339 bounds)
//	GET /v1/sagas/{namespace}/{queue}/{key}/{id}        a saga record
//	GET /v1/lanes/{namespace}/{queue}/{key}?after=&max= a page of a lane's messages
//	POST /v1/lanes/{namespace}/{queue}/{key}/messages/{id}/cancel?reason=
//	                                                    cancel a message: removed, or its lease
//	                                                    revoked when leased (CancelMessageResult)
//	GET /v1/queues/{namespace}/{queue}                  a queue's depth on every partition, with
//	                                                    each partition's pause and paused_partitions,
//	                                                    its retry_policy and retry_policy_partitions
//	PUT /v1/queues/{namespace}/{queue}/retry-policy     set the queue's retry policy (body:
//	                                                    RetryPolicy as protobuf JSON) on every partition
//	DELETE /v1/queues/{namespace}/{queue}/retry-policy  remove it from every partition
//	                                                    share and leases it counts, and its limits
//	POST /v1/queues/{namespace}/{queue}/pause|resume?reason=
//	                                                    pause or resume the queue's consumption on
//	                                                    every partition
//	PUT /v1/queues/{namespace}/{queue}/limits           cap the queue cluster-wide (body:
//	                                                    {"max_leased": K, "per_second": R}); DELETE
//	                                                    removes the cap; both answer as its GET
//	GET /v1/calendars/{namespace}?after=&max=         a page of a namespace's exclusion calendars
//	GET /v1/calendars/{namespace}/{name}                an exclusion calendar (CalendarRecord)
//	PUT /v1/calendars/{namespace}/{name}                put a calendar (body: Calendar as protobuf
//	                                                    JSON) on every partition
//	DELETE /v1/calendars/{namespace}/{name}             delete it from every partition (refused
//	                                                    while a schedule references it)
//	GET /v1/schedules/{namespace}?queue=&state=&after=&max=
//	                                                    a page of a namespace's schedules (state:
//	                                                    active, paused, suspended, cancelled, completed)
//	GET /v1/sagas/{namespace}?queue=&phase=&after=&max= a page of a namespace's sagas (phase:
//	                                                    waiting, completed, cancelled, timed_out)
//	GET /v1/audit?since=&from=&to=&after=&max=          a page of the audit log, oldest first
//	                                                    (PolicyAdmin on "*"; since: a duration)
//	POST /v1/schedules/{namespace}/{queue}/{key}/{id}/pause|resume|trigger
//	                                                    pause, resume or trigger a schedule at
//	                                                    whatever revision it is: its result
//	GET /ui/                                            the web UI (package silo/ui); / redirects there
//
// A cross-origin POST (one a page of another site makes the browser send) is refused with 403
// (http.CrossOriginProtection), so a web page cannot steer a loopback silo.
//
// Every route but /healthz, /readyz and the UI's files, /metrics included, needs
// "Authorization: Bearer <token>" of one of Config.AdminTokens, and acts as the token's
// principal: grants decide what it may read and do (403 Unauthorized otherwise). A missing,
// malformed or unknown token is 401 with a WWW-Authenticate challenge and the problem in the
// JSON error (code UNAUTHENTICATED, field authorization). With InsecureDev and no AdminTokens a
// request without a token acts as client.DefaultPrincipal (authenticate).
//
// A page (client.ListSchedules, client.ListSagas) is in (queue, key, id) order across every
// partition; next_after, null on the last page, is the after of the next.
//
// Every key is snake_case and every field is present, zero or not; "none" is null. Beside each
// instant x_unix_micros is x, the same instant in RFC 3339 UTC. A malformed id is 400 naming
// the field; a well-formed one that does not exist is 404.
func (s *Silo) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "silo": s.ID()})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", newSiloMetrics(s).handler())
	mux.HandleFunc("GET /v1/partitions", s.partitionTable)
	mux.HandleFunc("POST /v1/partitions/check", s.checkPartitions)
	mux.HandleFunc("GET /v1/silos", s.siloTable)
	mux.HandleFunc("GET /v1/coordinator", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, coordinatorJSON(s.CoordinatorStats(), s.coord.Load().Liveness()))
	})
	mux.HandleFunc("GET /v1/schedules/{namespace}/{queue}/{key}/{id}", func(w http.ResponseWriter, r *http.Request) {
		inspection, err := s.adminClient(r).ScheduleInspection(r.Context(), lanePath(r), r.PathValue("id"))
		s.writeRecord(w, inspection, err)
	})
	mux.HandleFunc("GET /v1/ledger/{namespace}/{queue}/{key}/{id}", s.ledger)
	mux.HandleFunc("GET /v1/sagas/{namespace}/{queue}/{key}/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := s.adminClient(r).InspectSaga(r.Context(), lanePath(r), r.PathValue("id"))
		s.writeRecord(w, rec, err)
	})
	mux.HandleFunc("GET /v1/schedules/{namespace}", s.listSchedules)
	mux.HandleFunc("GET /v1/sagas/{namespace}", s.listSagas)
	mux.HandleFunc("GET /v1/audit", s.auditLog)
	mux.HandleFunc("POST /v1/schedules/{namespace}/process-due", s.processDue)
	for _, action := range scheduleActions {
		mux.HandleFunc("POST /v1/schedules/{namespace}/{queue}/{key}/{id}/"+action, s.scheduleAction(action))
	}
	mux.HandleFunc("GET /v1/queues/{namespace}/{queue}", s.queueStats)
	for _, action := range queueActions {
		mux.HandleFunc("POST /v1/queues/{namespace}/{queue}/"+action, s.queueAction(action))
	}
	mux.HandleFunc("PUT /v1/queues/{namespace}/{queue}/retry-policy", s.putRetryPolicy)
	mux.HandleFunc("DELETE /v1/queues/{namespace}/{queue}/retry-policy", s.deleteRetryPolicy)
	mux.HandleFunc("PUT /v1/queues/{namespace}/{queue}/limits", s.putQueueLimits)
	mux.HandleFunc("DELETE /v1/queues/{namespace}/{queue}/limits", s.deleteQueueLimits)
	mux.HandleFunc("POST /v1/lanes/{namespace}/{queue}/{key}/messages/{id}/cancel", s.cancelMessage)
	mux.HandleFunc("GET /v1/calendars/{namespace}", s.listCalendars)
	mux.HandleFunc("GET /v1/calendars/{namespace}/{name}", s.getCalendar)
	mux.HandleFunc("PUT /v1/calendars/{namespace}/{name}", s.putCalendar)
	mux.HandleFunc("DELETE /v1/calendars/{namespace}/{name}", s.deleteCalendar)
	mux.Handle("GET "+ui.Prefix, ui.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	mux.HandleFunc("GET /v1/lanes/{namespace}/{queue}/{key}", func(w http.ResponseWriter, r *http.Request) {
		maxMessages, err := positiveMax(r.URL.Query(), 100)
		if err != nil {
			writeError(w, err)
			return
		}
		msgs, next, err := s.adminClient(r).InspectLane(r.Context(), lanePath(r), r.URL.Query().Get("after"), maxMessages)
		if err != nil {
			writeError(w, err)
			return
		}
		page := make([]json.RawMessage, len(msgs))
		for i, m := range msgs {
			page[i] = protoJSON(m)
		}
		body := map[string]any{"messages": page, "next_after": nil}
		if next != "" {
			body["next_after"] = next
		}
		writeJSON(w, http.StatusOK, body)
	})
	full := http.NewCrossOriginProtection().Handler(s.authenticate(mux))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.joined.Load() {
			full.ServeHTTP(w, r)
			return
		}
		s.joining(w, r)
	})
}

// joining answers the admin endpoint while the silo has not joined its cluster yet: /healthz
// is ok (the process is alive), /readyz is 503 saying what the silo waits for, and every other
// path is 503 Unavailable.
func (s *Silo) joining(w http.ResponseWriter, r *http.Request) {
	reason := fmt.Sprintf("joining cluster %q (silo %s, %s; seeds %v): waiting for a live peer of its cluster, or to form it",
		s.cfg.ClusterName, cluster.FormatID(s.host.SiloID()), storedCluster(s.host.ClusterID()), s.cfg.Seeds)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/healthz":
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "silo": nil, "joining": true})
	case r.Method == http.MethodGet && r.URL.Path == "/readyz":
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": reason})
	default:
		writeError(w, orrery.Errorf(orrery.CodeUnavailable, "%s", reason))
	}
}

// storedCluster describes the cluster id a store records.
func storedCluster(id uint64) string {
	if id == 0 {
		return "no cluster yet"
	}
	return "cluster " + cluster.FormatID(id)
}

// ledger serves a page of a schedule's occurrence ledger.
func (s *Silo) ledger(w http.ResponseWriter, r *http.Request) {
	q, err := ledgerQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	records, next, err := s.adminClient(r).ReadLedger(r.Context(), lanePath(r), r.PathValue("id"), q)
	if err != nil {
		writeError(w, err)
		return
	}
	page := make([]json.RawMessage, len(records))
	for i, rec := range records {
		page[i] = protoJSON(rec)
	}
	body := map[string]any{"records": page, "next_after": nil}
	if next != nil {
		body["next_after"] = base64.RawURLEncoding.EncodeToString(next)
	}
	writeJSON(w, http.StatusOK, body)
}

// listQuery reads a list's after (base64url) and max query parameters, and its enum filter
// parameter (name, one of names with prefix, lower-case and without it: "paused").
func listQuery(query url.Values, name, prefix string, names map[string]int32) (filter int32, after []byte, maxRecords int, err error) {
	if v := query.Get(name); v != "" {
		n, known := names[prefix+strings.ToUpper(v)]
		if !known || n == 0 {
			return 0, nil, 0, orrery.Invalid(name, "is not a %s: %q", name, v)
		}
		filter = n
	}
	if v := query.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > client.MaxListMax {
			return 0, nil, 0, orrery.Invalid("max", "must be an integer 1..%d, got %q", client.MaxListMax, v)
		}
		maxRecords = n
	}
	if after, err = pageAfter(query); err != nil {
		return 0, nil, 0, err
	}
	return filter, after, maxRecords, nil
}

// pageAfter reads a page's after query parameter: the base64url next_after of the page before.
func pageAfter(query url.Values) ([]byte, error) {
	v := query.Get("after")
	if v == "" {
		return nil, nil
	}
	after, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, orrery.Invalid("after", "must be the next_after of a previous page")
	}
	return after, nil
}

// positiveMax reads the max query parameter, a positive integer (def when absent).
func positiveMax(query url.Values, def int) (int, error) {
	v := query.Get("max")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, orrery.Invalid("max", "must be a positive integer, got %q", v)
	}
	return n, nil
}

// timeBounds reads the from and to query parameters, RFC 3339 instants (zero when absent).
func timeBounds(query url.Values) (from, to time.Time, err error) {
	for _, bound := range []struct {
		name string
		at   *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := query.Get(bound.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return time.Time{}, time.Time{}, orrery.Invalid(bound.name, "must be an RFC 3339 instant, got %q", v)
			}
			*bound.at = t
		}
	}
	return from, to, nil
}

// ledgerQuery reads a ledger page's from and to (RFC 3339 instants), max and after.
func ledgerQuery(query url.Values) (client.LedgerQuery, error) {
	var q client.LedgerQuery
	var err error
	if q.From, q.To, err = timeBounds(query); err != nil {
		return client.LedgerQuery{}, err
	}
	if q.MaxRecords, err = positiveMax(query, 0); err != nil {
		return client.LedgerQuery{}, err
	}
	if q.After, err = pageAfter(query); err != nil {
		return client.LedgerQuery{}, err
	}
	return q, nil
}

// enumName is an enum value's name in lower case without its prefix: "paused".
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// writePage answers a list page: its items under key, and next_after.
func writePage(w http.ResponseWriter, key string, items []map[string]any, next []byte) {
	if items == nil {
		items = []map[string]any{}
	}
	body := map[string]any{key: items, "next_after": nil}
	if next != nil {
		body["next_after"] = base64.RawURLEncoding.EncodeToString(next)
	}
	writeJSON(w, http.StatusOK, body)
}

// labelQuery is the label selector of a list's ?label=KEY=VALUE parameters (KEY alone: any
// value).
func labelQuery(q url.Values) map[string]string {
	labels := map[string]string{}
	for _, l := range q["label"] {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	return labels
}

// listSchedules serves a page of a namespace's schedules: ?queue=, ?state=, ?label=KEY=VALUE
// (repeatable; KEY alone: any value) and ?name_prefix= filter it.
func (s *Silo) listSchedules(w http.ResponseWriter, r *http.Request) {
	const prefix = "SCHEDULE_STATE_"
	state, after, maxRecords, err := listQuery(r.URL.Query(), "state", prefix, orreryv1.ScheduleState_value)
	if err != nil {
		writeError(w, err)
		return
	}
	labels := labelQuery(r.URL.Query())
	page, next, err := s.adminClient(r).ListSchedules(r.Context(), client.ListSchedulesRequest{
		Namespace: r.PathValue("namespace"), Queue: r.URL.Query().Get("queue"),
		State: orreryv1.ScheduleState(state), MaxRecords: maxRecords, After: after,
		Labels: labels, NamePrefix: r.URL.Query().Get("name_prefix"),
	})
	if err != nil {
		writeError(w, err)
		return
	}
	items := make([]map[string]any, len(page))
	for i, item := range page {
		items[i] = map[string]any{"partition": item.Partition, "state": enumName(item.State.String(), prefix), "record": protoJSON(item.Record)}
	}
	writePage(w, "schedules", items, next)
}

// listSagas serves a page of a namespace's sagas.
func (s *Silo) listSagas(w http.ResponseWriter, r *http.Request) {
	const prefix = "SAGA_PHASE_"
	phase, after, maxRecords, err := listQuery(r.URL.Query(), "phase", prefix, orreryv1.SagaPhase_value)
	if err != nil {
		writeError(w, err)
		return
	}
	page, next, err := s.adminClient(r).ListSagas(r.Context(), client.ListSagasRequest{
		Namespace: r.PathValue("namespace"), Queue: r.URL.Query().Get("queue"),
		Phase: orreryv1.SagaPhase(phase), MaxRecords: maxRecords, After: after, Labels: labelQuery(r.URL.Query()),
	})
	if err != nil {
		writeError(w, err)
		return
	}
	items := make([]map[string]any, len(page))
	for i, item := range page {
		items[i] = map[string]any{"partition": item.Partition, "phase": enumName(item.Record.GetPhase().String(), prefix), "record": protoJSON(item.Record)}
	}
	writePage(w, "sagas", items, next)
}

func lanePath(r *http.Request) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: r.PathValue("namespace"), Queue: r.PathValue("queue"), Key: r.PathValue("key")}
}

// readyz is ready when the silo is in the topology, its store's disk is above the free-space
// floor (below it every command is refused), its clock is not judged unfit
// (Config.MaxClockOffset: it then leads no partition), and each partition placed on it opens
// and answers within a short bound.
func (s *Silo) readyz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.stopped:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": "stopped"})
		return
	default:
	}
	if s.Rejoining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": errRejoining.Error()})
		return
	}
	if err := s.host.CheckFreeSpace(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error()})
		return
	}
	if err := s.clockUnfit(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": err.Error(), "clock": s.clockJSON()})
		return
	}
	owned, notReady, err := s.readiness(r.Context())
	if len(notReady) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "owned": owned, "not_ready": notReady, "reason": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ready": true, "owned": owned})
}

// readinessCheckTimeout bounds one readiness check of the owned partitions.
const readinessCheckTimeout = 3 * time.Second

// readiness asks each partition this silo leads for its status, within
// readinessCheckTimeout: notReady lists those that did not answer, and err is the first one's
// error.
func (s *Silo) readiness(ctx context.Context) (owned, notReady []int, err error) {
	owned = s.Owned()
	ctx, cancel := context.WithTimeout(ctx, readinessCheckTimeout)
	defer cancel()
	for i, st := range s.statuses(ctx, s.client, owned) {
		if st.err != nil {
			if err == nil {
				err = fmt.Errorf("partition %d: %w", owned[i], st.err)
			}
			notReady = append(notReady, owned[i])
		}
	}
	return owned, notReady, err
}

type partitionStatus struct {
	status *orreryv1.PartitionStatus
	err    error
}

// statuses asks the given partitions for their status concurrently, through c.
func (s *Silo) statuses(ctx context.Context, c *client.Client, partitions []int) []partitionStatus {
	out := make([]partitionStatus, len(partitions))
	var wg sync.WaitGroup
	for i, n := range partitions {
		wg.Go(func() {
			st, err := c.PartitionStatus(ctx, n)
			out[i] = partitionStatus{st, err}
		})
	}
	wg.Wait()
	return out
}

// partitionTable lists every partition with its status (from its leader) and its Raft group as
// this silo's replica sees it ("replica": leader, term, voters, learners, applied index).
func (s *Silo) partitionTable(w http.ResponseWriter, r *http.Request) {
	all := make([]int, s.cfg.Partitions)
	for i := range all {
		all[i] = i
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rows := make([]map[string]any, len(all))
	for i, st := range s.statuses(ctx, s.adminClient(r), all) {
		row := map[string]any{"partition": i, "replica": s.replicaRow(i)}
		if st.err != nil {
			row["error"] = st.err.Error()
		} else {
			row["status"] = protoJSON(st.status)
		}
		rows[i] = row
	}
	writeJSON(w, http.StatusOK, map[string]any{"silo": s.ID(), "silo_id": cluster.FormatID(s.SiloID()), "partitions": rows, "owned_here": s.Owned(),
		"clock": s.clockJSON()})
}

// maxCheckAgain bounds the checks checkPartitions proposes again to a partition whose
// leadership moved before its verdict.
const maxCheckAgain = 3

// checkPartitions runs a consistency check of every partition now: it proposes a
// CheckConsistency command to each (as engine.ConsistencyPrincipal) and waits, up to
// partition.CheckTimeout and a margin, for its leader's verdict on a check concluded after the
// request began, proposing the check again (at most maxCheckAgain times) when the partition's
// leadership moves first. "consistent" is true when every partition's verdict is.
func (s *Silo) checkPartitions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), partition.CheckTimeout+15*time.Second)
	defer cancel()
	started := time.Now().UnixMicro()
	checker, reader := s.client.As(engine.ConsistencyPrincipal), s.adminClient(r)
	rows := make([]map[string]any, s.cfg.Partitions)
	var wg sync.WaitGroup
	for n := range s.cfg.Partitions {
		wg.Go(func() {
			row := map[string]any{"partition": n, "check": nil, "error": nil}
			rows[n] = row
			check := []*orreryv1.Mutation{{Kind: &orreryv1.Mutation_CheckConsistency{CheckConsistency: &orreryv1.CheckConsistency{}}}}
			if _, _, err := checker.Batch(ctx, n, check); err != nil {
				row["error"] = err.Error()
				return
			}
			// A leadership that moves before the verdict takes the check's collection with it:
			// the new leader (a new activation epoch) is asked for a check of its own.
			var epoch uint64
			for again := 0; ; {
				st, err := reader.PartitionStatus(ctx, n)
				if c := st.GetLastCheck(); err == nil && c != nil && c.GetAtUnixMicros() >= started {
					row["check"] = json.RawMessage(protoJSON(c))
					return
				}
				if e := st.GetActivationEpoch(); err == nil && e != epoch {
					if epoch != 0 && again < maxCheckAgain {
						again++
						if _, _, err := checker.Batch(ctx, n, check); err != nil {
							row["error"] = err.Error()
							return
						}
					}
					epoch = e
				}
				select {
				case <-ctx.Done():
					row["error"] = fmt.Sprintf("no verdict from partition %d's leader within %v", n, partition.CheckTimeout+15*time.Second)
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	consistent := true
	for _, row := range rows {
		raw, ok := row["check"].(json.RawMessage)
		var c struct {
			Consistent bool `json:"consistent"`
		}
		if !ok || json.Unmarshal(raw, &c) != nil || !c.Consistent {
			consistent = false
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"silo": s.ID(), "consistent": consistent, "partitions": rows})
}

// replicaRow is partition n's Raft group as this silo's replica sees it; nil before it opens.
// On the leader, progress lists every replica (itself included) by silo id: its match index
// and lag, how many committed entries it is missing (commit_index - match); elsewhere it is
// null.
func (s *Silo) replicaRow(n int) map[string]any {
	st, ok := s.host.Status(n)
	if !ok {
		return nil
	}
	row := map[string]any{
		"leader_silo": nil, "term": st.Term, "applied_index": st.AppliedIndex, "commit_index": st.CommitIndex,
		"apply_version": s.host.ApplyVersion(n),
		"voters":        formatIDs(st.Voters), "learners": formatIDs(st.Learners), "leads": st.CanPropose,
		"leader_transitions": st.LeaderTransitions, "progress": nil, "without_quorum_since": nil,
	}
	if since, without := s.quorum.without(n); without {
		row["without_quorum_since"] = instant(since)
	}
	if st.Leader != 0 {
		row["leader_silo"] = cluster.FormatID(st.Leader)
	}
	if st.Progress != nil {
		ids := slices.Sorted(maps.Keys(st.Progress))
		progress := make([]map[string]any, len(ids))
		for i, id := range ids {
			pr := st.Progress[id]
			lag := uint64(0)
			if st.CommitIndex > pr.Match {
				lag = st.CommitIndex - pr.Match
			}
			progress[i] = map[string]any{"silo": cluster.FormatID(id), "match_index": pr.Match, "lag": lag,
				"active": pr.Active, "learner": pr.Learner, "caught_up": pr.CaughtUp}
		}
		row["progress"] = progress
	}
	row["consistency"] = consistencyRow(s.host.Consistency(n))
	return row
}

// consistencyRow is a partition's consistency as this silo knows it: this replica's last
// checksum (checked_index, checksum), where this silo led a check its last verdict, and the
// rebuilds of divergent replicas it sent from its state (repairs, last_repair).
func consistencyRow(c partition.ConsistencyStatus) map[string]any {
	row := map[string]any{"checked_index": c.Own.Index, "checksum": nil, "inconsistencies": c.Inconsistencies, "last_verdict": nil,
		"repairs": c.Repairs, "last_repair": nil}
	if c.Own.Index != 0 {
		row["checksum"] = hex.EncodeToString(c.Own.Sum)
	}
	if r := c.LastRepair; r.Replica != 0 {
		repair := map[string]any{"silo": cluster.FormatID(r.Replica), "index": r.Index, "at": r.At.UTC().Format(time.RFC3339Nano), "installed": r.Err == nil, "error": nil}
		if r.Err != nil {
			repair["error"] = r.Err.Error()
		}
		row["last_repair"] = repair
	}
	if v := c.Last; v.Index != 0 {
		sums := []map[string]any{}
		for _, r := range slices.Sorted(maps.Keys(v.Sums)) {
			sums = append(sums, map[string]any{"silo": cluster.FormatID(r), "checksum": hex.EncodeToString(v.Sums[r])})
		}
		row["last_verdict"] = map[string]any{"index": v.Index, "at": v.At.UTC().Format(time.RFC3339Nano), "consistent": v.Consistent(),
			"checksums": sums, "divergent": formatIDs(v.Divergent), "missing": formatIDs(v.Missing)}
	}
	return row
}

// siloTable lists the silos this silo knows of: the topology's members (alive, with their actor
// address) and any other silo its replicas name as a voter, learner or leader (not alive, no
// address), with how many of the partitions hosted here it leads and replicates, as this silo's
// replicas see them, and the retired silos (cluster.Provider.Retire) it knows.
func (s *Silo) siloTable(w http.ResponseWriter, r *http.Request) {
	live := s.liveSilos()
	type counts struct{ leads, replicas int }
	silos := map[uint64]*counts{}
	of := func(id uint64) *counts {
		if silos[id] == nil {
			silos[id] = &counts{}
		}
		return silos[id]
	}
	for id := range live {
		of(id)
	}
	hosted := 0
	for n := range s.cfg.Partitions {
		st, ok := s.host.Status(n)
		if !ok {
			continue
		}
		hosted++
		for _, id := range st.Voters {
			of(id).replicas++
		}
		for _, id := range st.Learners {
			of(id).replicas++
		}
		if st.Leader != 0 {
			of(st.Leader).leads++
		}
	}
	rows := make([]map[string]any, 0, len(silos))
	builds := s.siloBuilds()
	peers := s.offsets.Peers()
	for _, id := range slices.Sorted(maps.Keys(silos)) {
		address, alive := live[id]
		build, known := builds[id]
		row := map[string]any{"silo_id": cluster.FormatID(id), "address": nil, "alive": alive,
			"leads": silos[id].leads, "replicas": silos[id].replicas, "self": id == s.SiloID(), "retired": s.member().provider.Retired(id),
			"build": nil, "build_differs": known && build != Build()}
		if known {
			row["build"] = build
		}
		if alive {
			row["address"] = address
		}
		row["clock"] = s.peerClockJSON(id, peers)
		rows = append(rows, row)
	}
	retired := []string{}
	for _, id := range s.member().provider.RetiredSilos() {
		retired = append(retired, cluster.FormatID(id))
	}
	writeJSON(w, http.StatusOK, map[string]any{"silo": s.ID(), "silo_id": cluster.FormatID(s.SiloID()),
		"partitions": s.cfg.Partitions, "hosted_here": hosted, "silos": rows, "retired_silos": retired, "clock": s.clockJSON()})
}

func (s *Silo) writeRecord(w http.ResponseWriter, rec proto.Message, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(protoJSON(rec))
}

// jsonOptions render protobuf messages with their snake_case field names and every field,
// zero or not (a partition 0, an ordinal 0); an unset message field is null.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// numbers64 makes the admin JSON type its numbers one way: protojson writes 64-bit integers as
// decimal strings, the admin's own rows as numbers; this turns the strings of doc, the protojson
// of a message md, into numbers (exact up to 2^53 in JavaScript: instants in microseconds,
// indexes, revisions and counts are far below). Silo ids, random 64-bit numbers, become the
// strings the admin's rows write them as (cluster.FormatID). Map keys stay strings.
func numbers64(doc any, md protoreflect.MessageDescriptor) any {
	obj, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		v, present := obj[name]
		if !present || v == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := v.(map[string]any); ok {
				for k, item := range m {
					m[k] = number64(item, fd.MapValue())
				}
			}
		case fd.IsList():
			if list, ok := v.([]any); ok {
				for j, item := range list {
					list[j] = number64(item, fd)
				}
			}
		default:
			obj[name] = number64(v, fd)
		}
	}
	return obj
}

// number64 is one value of field fd (an element, for a list or map) as numbers64 renders it.
func number64(v any, fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return numbers64(v, fd.Message())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		s, ok := v.(string)
		if !ok {
			return v
		}
		if strings.HasSuffix(string(fd.Name()), "_silo") {
			if id, err := strconv.ParseUint(s, 10, 64); err == nil {
				if id == 0 {
					return nil
				}
				return cluster.FormatID(id)
			}
			return v
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				return v
			}
		}
		return json.Number(s)
	}
	return v
}

// instantSuffix ends the names of fields holding an instant in unix microseconds (0: none).
const instantSuffix = "_unix_micros"

// protoJSON renders m for the admin endpoint: beside each instant field x_unix_micros it adds x,
// the instant in RFC 3339 UTC (null when 0, none), and its 64-bit integers are JSON numbers as
// everywhere else in the admin JSON (see numbers64).
func protoJSON(m proto.Message) json.RawMessage {
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error()))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error()))
	}
	doc = numbers64(doc, m.ProtoReflect().Descriptor())
	addInstants(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", err.Error()))
	}
	return out
}

// addInstants walks a decoded JSON document and adds the RFC 3339 twin of every instant field.
func addInstants(doc any) {
	switch v := doc.(type) {
	case map[string]any:
		for k, field := range v {
			if name, ok := strings.CutSuffix(k, instantSuffix); ok {
				if list, isList := field.([]any); isList {
					twins := make([]any, len(list))
					for i, item := range list {
						twins[i] = rfc3339(item)
					}
					v[name] = twins
				} else {
					v[name] = rfc3339(field)
				}
				continue
			}
			addInstants(field)
		}
	case []any:
		for _, item := range v {
			addInstants(item)
		}
	}
}

// rfc3339 renders an instant in unix microseconds, as protojson writes it (a string, or a
// number for 32-bit fields), in RFC 3339 UTC; 0 (none) and anything else is null.
func rfc3339(v any) any {
	var s string
	switch n := v.(type) {
	case string:
		s = n
	case json.Number:
		s = n.String()
	default:
		return nil
	}
	micros, err := strconv.ParseInt(s, 10, 64)
	if err != nil || micros == 0 {
		return nil
	}
	return instant(time.UnixMicro(micros))
}

// instant renders t in RFC 3339 UTC with microseconds; the zero time (none) is null.
func instant(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// unixMicros renders t in unix microseconds, a number as every integer of the admin JSON; the
// zero time (none) is null.
func unixMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// coordinatorJSON renders the due coordinator's stats for /v1/coordinator. next_due_at is the
// coordinator's view as of its last scan of the partition (or hint), and timer_at when it
// serves the partition next; each is null when none is known. liveness lists the records the
// coordinator reports late or failing.
func coordinatorJSON(st duecoordinator.Stats, live []duecoordinator.Liveness) map[string]any {
	partitions := make([]map[string]any, len(st.Partitions))
	for i, p := range st.Partitions {
		partitions[i] = map[string]any{
			"partition":               p.Partition,
			"next_due_at_unix_micros": unixMicros(p.NextDueAt),
			"next_due_at":             instant(p.NextDueAt),
			"timer_at_unix_micros":    unixMicros(p.TimerAt),
			"timer_at":                instant(p.TimerAt),
			"queued":                  p.Queued,
			"in_flight":               p.InFlight,
			"consecutive_failures":    p.ConsecutiveFailures,
			"skipped_refs":            p.SkippedRefs,
			"activation_epoch":        strconv.FormatUint(p.ActivationEpoch, 10),
			"late_records":            p.LateRecords,
			"failing_records":         p.FailingRecords,
		}
	}
	liveness := make([]map[string]any, len(live))
	for i, l := range live {
		liveness[i] = map[string]any{"partition": l.Partition, "kind": l.Kind.String(), "lane": protoJSON(l.Lane), "id": l.ID,
			"state": l.State, "reason": l.Reason, "due_at": instant(l.DueAt), "since": instant(l.Since)}
	}
	return map[string]any{
		"rounds": st.Rounds, "scans": st.Scans, "commands_sent": st.CommandsSent,
		"refs_dispatched": st.RefsDispatched, "stale_ignored": st.StaleIgnored, "refs_skipped": st.RefsSkipped,
		"retries": st.Retries, "errors": st.Errors, "partitions": partitions,
		"liveness_changes": st.LivenessChanges, "liveness": liveness,
	}
}

func writeError(w http.ResponseWriter, err error) {
	e := orrery.AsError(err)
	writeJSON(w, orrery.HTTPStatus(e.Code), map[string]any{"error": map[string]any{"code": e.Code.String(), "message": e.Message, "field": e.Field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// formatIDs renders silo ids as cluster.FormatID does.
func formatIDs(ids []uint64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = cluster.FormatID(id)
	}
	return out
}
