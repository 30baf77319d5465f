package silo

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/orreryhq/orrery"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// scheduleAction serves POST
// /v1/schedules/{namespace}/{queue}/{key}/{id}/{pause|resume|trigger|skip-expired|backfill}: it
// pauses, resumes or triggers the schedule at whatever revision it is, passes (in one command)
// the expired occurrences it stopped at, or backfills ?from=&to= (see backfill), as the CLI
// does, and answers the schedule's mutation result.
func (s *Silo) scheduleAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		lane, id := lanePath(r), r.PathValue("id")
		var (
			res *orreryv1.ScheduleResult
			err error
		)
		switch action {
		case "pause":
			res, err = s.adminClient(r).PauseSchedule(r.Context(), &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
		case "resume":
			res, err = s.adminClient(r).ResumeSchedule(r.Context(), &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
		case "trigger":
			res, err = s.adminClient(r).TriggerSchedule(r.Context(), &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: id})
		case "skip-expired":
			res, err = s.adminClient(r).SkipExpired(r.Context(), &orreryv1.SkipExpired{Lane: lane, ScheduleId: id})
		case "backfill":
			res, err = s.backfill(r, lane, id)
		}
		s.writeRecord(w, res, err)
	}
}

// scheduleActions are the actions scheduleAction serves.
var scheduleActions = []string{"pause", "resume", "trigger", "skip-expired", "backfill"}

// backfill runs the BackfillSchedule commands of the range ?from=&to= (RFC 3339; to defaults to
// now) to its end and answers the last result with every enqueued id and nominal instant.
func (s *Silo) backfill(r *http.Request, lane *orreryv1.Lane, id string) (*orreryv1.ScheduleResult, error) {
	q := r.URL.Query()
	from, err := time.Parse(time.RFC3339Nano, q.Get("from"))
	if err != nil {
		return nil, orrery.Invalid("from", "want an RFC 3339 instant, got %q", q.Get("from"))
	}
	to := time.Now()
	if q.Get("to") != "" {
		if to, err = time.Parse(time.RFC3339Nano, q.Get("to")); err != nil {
			return nil, orrery.Invalid("to", "want an RFC 3339 instant, got %q", q.Get("to"))
		}
	}
	m := &orreryv1.BackfillSchedule{Lane: lane, ScheduleId: id, FromUnixMicros: from.UnixMicro(), ToUnixMicros: to.UnixMicro()}
	var ids []string
	var nominals []int64
	for {
		res, err := s.adminClient(r).BackfillSchedule(r.Context(), m)
		if err != nil {
			return nil, err
		}
		ids, nominals = append(ids, res.GetEnqueuedIds()...), append(nominals, res.GetEnqueuedNominalDueAtUnixMicros()...)
		if m.FromUnixMicros = res.GetBackfillResumeFromUnixMicros(); m.FromUnixMicros == 0 {
			res.EnqueuedIds, res.EnqueuedNominalDueAtUnixMicros = ids, nominals
			return res, nil
		}
	}
}

// queueStats serves GET /v1/queues/{namespace}/{queue}: the queue's depth on every partition
// (client.QueueStats) with each partition's pause, retry policy and share, on how many
// partitions it is paused, its retry policy (the lowest partition's that has one: retry_policy,
// null when none has) with on how many partitions it is set (retry_policy_partitions; fewer than
// all after a SetQueueRetryPolicy that did not reach every partition), and its limits
// (limitsJSON).
func (s *Silo) queueStats(w http.ResponseWriter, r *http.Request) {
	shares, err := s.adminClient(r).QueueStats(r.Context(), r.PathValue("namespace"), r.PathValue("queue"), "")
	if err != nil {
		writeError(w, err)
		return
	}
	partitions := make([]map[string]any, len(shares))
	paused, retrying := 0, 0
	var policy any
	for i, share := range shares {
		partitions[i] = map[string]any{"partition": share.Partition, "stats": protoJSON(share.Stats)}
		if share.Stats.GetPause() != nil {
			paused++
		}
		if held := share.Stats.GetRetry(); held != nil {
			if retrying == 0 {
				policy = protoJSON(held)
			}
			retrying++
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": r.PathValue("namespace"), "queue": r.PathValue("queue"),
		"partitions": partitions, "paused_partitions": paused, "retry_policy": policy, "retry_policy_partitions": retrying,
		"limits": limitsJSON(shares)})
}

// queueAction serves POST /v1/queues/{namespace}/{queue}/{pause|resume}?reason=: it pauses or
// resumes the queue on every partition (client.PauseQueue, ResumeQueue) and answers
// {"namespace", "queue", "paused", "partitions"}; when some partitions were not reached the
// error names them (calling again is safe).
func (s *Silo) queueAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		namespace, queue := r.PathValue("namespace"), r.PathValue("queue")
		cl := s.adminClient(r)
		var err error
		if action == "pause" {
			err = cl.PauseQueue(r.Context(), namespace, queue, r.URL.Query().Get("reason"))
		} else {
			err = cl.ResumeQueue(r.Context(), namespace, queue)
		}
		var missed *client.PartitionsError
		if errors.As(err, &missed) { // the message names the partitions, not only the first's error
			err = orrery.Wrap(orrery.CodeOf(err), err, "%s", missed.Error())
		}
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": namespace, "queue": queue, "paused": action == "pause", "partitions": cl.Partitions()})
	}
}

// queueActions are the actions queueAction serves.
var queueActions = []string{"pause", "resume"}

// cancelMessage serves POST /v1/lanes/{namespace}/{queue}/{key}/messages/{id}/cancel?reason=:
// it cancels the message (client.CancelMessage) and answers its CancelMessageResult.
func (s *Silo) cancelMessage(w http.ResponseWriter, r *http.Request) {
	res, err := s.adminClient(r).CancelMessage(r.Context(), lanePath(r), r.PathValue("id"), r.URL.Query().Get("reason"))
	s.writeRecord(w, res, err)
}

// processDue serves POST /v1/schedules/{namespace}/process-due?partition=N (or ?queue=Q&key=K
// for one lane; queue also narrows a partition's) [&max=N]: it emits now, oldest due first, at
// most max (default client.DefaultProcessDue) of the namespace's due schedules, as the CLI's
// schedules process-due does (client.ProcessDue), and answers what it did.
func (s *Silo) processDue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := client.ProcessDueRequest{Namespace: r.PathValue("namespace"), Queue: q.Get("queue"), Partition: -1}
	maxSchedules, err := positiveMax(q, client.DefaultProcessDue)
	if err != nil {
		writeError(w, err)
		return
	}
	req.MaxSchedules = maxSchedules
	switch {
	case q.Get("key") != "" && req.Queue == "":
		writeError(w, orrery.Invalid("queue", "is required with key"))
		return
	case q.Get("key") != "":
		req.Lane = &orreryv1.Lane{Namespace: req.Namespace, Queue: req.Queue, Key: q.Get("key")}
	default:
		n, err := strconv.Atoi(q.Get("partition"))
		if err != nil || n < 0 {
			writeError(w, orrery.Invalid("partition", "want a partition number (or queue and key), got %q", q.Get("partition")))
			return
		}
		req.Partition = n
	}
	done, err := s.adminClient(r).ProcessDue(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	failed := []map[string]string{}
	for _, f := range done.Failed {
		failed = append(failed, map[string]string{"namespace": f.Lane.GetNamespace(), "queue": f.Lane.GetQueue(), "key": f.Lane.GetKey(),
			"schedule_id": f.ScheduleID, "error": f.Err.Error()})
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": done.Schedules, "enqueued": done.Enqueued, "more": done.More, "failed": failed})
}
