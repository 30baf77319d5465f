package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/input"
)

// lateAfter is how far in the past a schedule's next due instant may be before describe calls
// it late: the due coordinator emits within a second or so of the due instant.
const lateAfter = 5 * time.Second

// scheduleStates are --state's values.
const scheduleStates = "active, paused, suspended, cancelled, completed"

// schedules runs a schedules subcommand.
func (c *command) schedules(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("schedules: a subcommand is required: %s (orrery schedules help)", scheduleSubcommands)
	}
	switch args[0] {
	case "help", "-h", "--help":
		_, err := fmt.Fprint(c.stdout, schedulesHelp)
		return err
	case "create", "update":
		return c.defineSchedule(ctx, args[0], args[1:])
	case "list":
		return c.listSchedules(ctx, args[1:])
	case "describe":
		return c.describeSchedule(ctx, args[1:])
	case "pause", "resume", "trigger", "delete", "skip-expired":
		return c.scheduleAction(ctx, args[0], args[1:])
	case "backfill":
		return c.backfillSchedule(ctx, args[1:])
	case "process-due":
		return c.processDue(ctx, args[1:])
	case "export":
		return c.exportSchedules(ctx, args[1:])
	case "import":
		return c.importSchedules(ctx, args[1:])
	}
	return usagef("schedules: unknown subcommand %q: want %s", args[0], scheduleSubcommands)
}

// labelFlag is a repeatable KEY=VALUE flag (KEY alone: an empty value) collecting labels.
type labelFlag map[string]string

// String is the labels as KEY=VALUE pairs, by key.
func (l labelFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// Set adds one KEY=VALUE.
func (l labelFlag) Set(s string) error {
	k, v, _ := strings.Cut(s, "=")
	if k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	l[k] = v
	return nil
}

// listFlags are the flags of a list: its filter and page.
type listFlags struct {
	namespace, queue, after string
	max                     int
}

// define adds the list flags to fs.
func (f *listFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", "", "namespace to list (required)")
	fs.StringVar(&f.queue, "queue", "", "only this queue")
	fs.IntVar(&f.max, "max", 0, fmt.Sprintf("page size (0: %d; at most %d)", client.DefaultListMax, client.MaxListMax))
	fs.StringVar(&f.after, "after", "", "continuation a previous page printed")
}

// check validates the list flags.
func (f *listFlags) check() ([]byte, error) {
	if f.namespace == "" {
		return nil, usagef("namespace: is required")
	}
	if f.max < 0 || f.max > client.MaxListMax {
		return nil, usagef("max: must be 0..%d, got %d", client.MaxListMax, f.max)
	}
	return decodeToken(f.after)
}

// parseState reads --state.
func parseState(v string) (orreryv1.ScheduleState, error) {
	n, err := enumFlag("state", v, "SCHEDULE_STATE_", orreryv1.ScheduleState_value, scheduleStates)
	return orreryv1.ScheduleState(n), err
}

// listSchedules prints one page of a namespace's schedules and the continuation of the next.
func (c *command) listSchedules(ctx context.Context, args []string) error {
	fs := c.flagSet("schedules list")
	var lf listFlags
	var state, namePrefix string
	labels := labelFlag{}
	lf.define(fs)
	fs.StringVar(&state, "state", "", "only schedules in this state: "+scheduleStates)
	fs.Var(labels, "label", "only schedules with this label, KEY=VALUE (KEY alone: any value); repeatable")
	fs.StringVar(&namePrefix, "name-prefix", "", "only schedules whose name begins with it")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	after, err := lf.check()
	if err != nil {
		return err
	}
	st, err := parseState(state)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	page, next, err := cl.ListSchedules(ctx, client.ListSchedulesRequest{Namespace: lf.namespace, Queue: lf.queue, State: st, MaxRecords: lf.max, After: after,
		Labels: labels, NamePrefix: namePrefix})
	if err != nil {
		return fmt.Errorf("list schedules of namespace %q: %w", lf.namespace, err)
	}
	if c.output == "json" {
		items := make([]map[string]any, 0, len(page))
		for _, s := range page {
			rec, err := protoValue(s.Record)
			if err != nil {
				return err
			}
			items = append(items, map[string]any{"partition": s.Partition, "state": enumName(s.State.String(), "SCHEDULE_STATE_"), "record": rec})
		}
		return writeJSON(c.stdout, map[string]any{"schedules": items, "next_after": encodeToken(next)})
	}
	t := newTable(c.stdout, "QUEUE", "KEY", "ID", "NAME", "STATE", "NEXT FIRE", "REVISION")
	for _, s := range page {
		def := s.Record.GetDefinition()
		t.row(def.GetLane().GetQueue(), def.GetLane().GetKey(), def.GetScheduleId(), def.GetName(),
			enumName(s.State.String(), "SCHEDULE_STATE_"), instant(s.Record.GetNextDueAtUnixMicros()), strconv.FormatUint(s.Record.GetRevision(), 10))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if token := encodeToken(next); token != nil {
		fmt.Fprintf(c.stdout, "next page: --after %s\n", *token)
	}
	return nil
}

// laneArgs reads the NS QUEUE KEY ID arguments of a record command: the lane, and the ID
// argument, which may be a schedule's or saga's name instead (anything but a canonical UUID;
// see scheduleID and sagaID).
func laneArgs(what string, args []string) (*orreryv1.Lane, string, error) {
	if len(args) != 4 {
		return nil, "", usagef("%s: want NAMESPACE QUEUE KEY ID (or NAME), got %d arguments", what, len(args))
	}
	return &orreryv1.Lane{Namespace: args[0], Queue: args[1], Key: args[2]}, args[3], nil
}

// scheduleID is the schedule id a command's ID argument names in lane: the argument itself
// when it is a canonical UUID, else the identity the partition resolves the name to
// (client.ScheduleIDOf): the live schedule of that name, or, when none lives, the id its next
// creation takes. A deleted schedule's id stays terminal, so a name whose schedule was deleted
// and created again addresses the new one; the deleted one is addressed by its id.
func scheduleID(ctx context.Context, cl *client.Client, lane *orreryv1.Lane, given string) (string, error) {
	if input.UUID("id", given) == nil {
		return given, nil
	}
	id, err := cl.ScheduleIDOf(ctx, lane, given)
	if err != nil {
		return "", fmt.Errorf("schedule named %q: %w", given, err)
	}
	return id, nil
}

// sagaID is the saga id a command's ID argument names: the argument itself when it is a
// canonical UUID, else the id derived from the name (client.SagaID).
func sagaID(namespace, given string) string {
	if input.UUID("id", given) == nil {
		return given
	}
	return client.SagaID(namespace, given)
}

// recordLabel names a record in messages: its id, or the name it was given by and the id
// derived from it.
func recordLabel(given, id string) string {
	if given == id {
		return id
	}
	return fmt.Sprintf("%q (id %s)", given, id)
}

// describeSchedule prints a schedule's spec, policies, next fire times, last outcomes, owning
// partition and its leader, whether it is late, and what the due coordinator reports of it
// (late or failing, and why).
func (c *command) describeSchedule(ctx context.Context, args []string) error {
	generations := false
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		if a == "--generations" || a == "-generations" {
			generations = true
			return true
		}
		return false
	})
	lane, given, err := laneArgs("schedules describe", args)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	id, err := scheduleID(ctx, cl, lane, given)
	if err != nil {
		return fmt.Errorf("describe schedule: %w", err)
	}
	in, err := cl.ScheduleInspection(ctx, lane, id)
	if err != nil {
		return fmt.Errorf("describe schedule %s: %w", recordLabel(args[3], id), err)
	}
	partition := cl.PartitionOf(lane)
	leader, leaderErr := "", ""
	if st, err := cl.PartitionStatus(ctx, partition); err != nil {
		leaderErr = err.Error()
	} else {
		leader = st.GetSilo()
	}
	late, lateBy := lateness(in.GetRecord(), time.Now())
	if c.output == "json" {
		inspection, err := protoValue(in)
		if err != nil {
			return err
		}
		doc := map[string]any{"inspection": inspection, "partition": partition, "leader_silo": nil, "late": late, "late_by_seconds": lateBy.Seconds(),
			"liveness": livenessState(in.GetLiveness())}
		if leader != "" {
			doc["leader_silo"] = leader
		}
		if leaderErr != "" {
			doc["leader_error"] = leaderErr
		}
		return writeJSON(c.stdout, doc)
	}
	rec := in.GetRecord()
	def := rec.GetDefinition()
	w := newTable(c.stdout, "FIELD", "VALUE")
	w.row("schedule", def.GetScheduleId())
	w.row("name", def.GetName())
	w.row("lane", lane.GetNamespace()+"/"+lane.GetQueue()+"/"+lane.GetKey())
	w.row("state", scheduleState(rec))
	w.row("revision", strconv.FormatUint(rec.GetRevision(), 10))
	w.row("generation", strconv.FormatUint(rec.GetGeneration(), 10))
	w.row("spec", specText(def.GetSpec()))
	if cron := def.GetSpec().GetCron(); cron != nil {
		zone := cron.GetTimeZone()
		if zone == "" {
			zone = "UTC"
		}
		w.row("zone", zone)
		w.row("dst gap", policyName(cron.GetGapPolicy().String(), "CRON_GAP_POLICY_", "shift"))
		w.row("dst repeat", policyName(cron.GetRepeatPolicy().String(), "CRON_REPEAT_POLICY_", "cronos: both passes for a wildcard, range or step hour, minute or second; else the first"))
	}
	w.row("misfire", policyName(def.GetMisfire().String(), "MISFIRE_POLICY_", "catch_up"))
	w.row("overlap", policyName(def.GetOverlap().String(), "OVERLAP_POLICY_", "allow_all"))
	w.row("catch-up window", catchUpText(def.GetCatchUpWindowMicros(), def.GetMisfire()))
	w.row("bounds", boundsText(def))
	w.row("jitter", jitterText(def))
	if p := def.GetCatchUpPace(); p != nil {
		w.row("catch-up pace", fmt.Sprintf("at most %d per %v", p.GetMaxPerWindow(), time.Duration(p.GetWindowMicros())*time.Microsecond))
	}
	backlog := strconv.FormatUint(in.GetBacklog(), 10)
	if in.GetBacklogCapped() {
		backlog += "+"
	}
	w.row("backlog", backlog)
	if l := def.GetLabels(); len(l) > 0 {
		w.row("labels", labelFlag(l).String())
	}
	if p := def.GetTemplate().GetPriority(); p != 0 {
		w.row("priority", strconv.Itoa(int(p))+" (each occurrence's)")
	}
	if r := def.GetTemplate().GetRetry(); r != nil {
		w.row("retry policy", describeRetry(client.MessageRetryOf(r))+" (each occurrence's)")
	}
	if cals := def.GetCalendars(); len(cals) > 0 {
		w.row("calendars", strings.Join(cals, ",")+" (excluded instants are ledgered excluded)")
	}
	if def.GetExpired() == orreryv1.ExpiredPolicy_EXPIRED_POLICY_SKIP {
		w.row("on expiry", "skip: an occurrence whose ttl passed is ledgered expired")
	} else {
		w.row("on expiry", "stop until skip-expired (default)")
	}
	if def.GetPauseOnFailure() {
		w.row("on failure", "pause: a dead-lettered occurrence pauses the schedule")
	} else {
		w.row("on failure", "keep firing (default)")
	}
	if r := rec.GetSeriesEndReason(); r != "" {
		w.row("ended", r)
	}
	if r := rec.GetPausedReason(); r != "" {
		w.row("paused because", r)
	}
	w.row("redacted", strings.Join(rec.GetRedactedPaths(), ", "))
	w.row("next due", instant(rec.GetNextDueAtUnixMicros()))
	if late {
		w.row("late", "yes, by "+lateBy.Round(time.Second).String())
	} else {
		w.row("late", "no")
	}
	if l := in.GetLiveness(); l != nil {
		w.row("liveness", fmt.Sprintf("%s since %s: %s", l.GetState(), instant(l.GetSinceUnixMicros()), l.GetReason()))
	} else {
		w.row("liveness", "ok")
	}
	w.row("partition", strconv.Itoa(partition))
	if leaderErr != "" {
		w.row("leader silo", "unknown: "+leaderErr)
	} else {
		w.row("leader silo", leader)
	}
	if r := in.GetSuspendedReason(); r != "" {
		w.row("suspended", r)
	}
	if v := in.GetZoneRulesVersion(); v != "" {
		w.row("zone rules", "tzdata "+v)
	}
	if m := in.GetEvaluatorMismatch(); m != "" {
		w.row("evaluator mismatch", m)
	}
	for i, t := range in.GetNextFireTimesUnixMicros() {
		w.row(fmt.Sprintf("next fire %d", i+1), instant(t))
	}
	for i, o := range in.GetLastOutcomes() {
		outcome := enumName(o.GetOutcome().String(), "LEDGER_OUTCOME_")
		if o.GetReason() != "" {
			outcome += " (" + o.GetReason() + ")"
		}
		w.row(fmt.Sprintf("outcome %d", i+1), fmt.Sprintf("%s ordinal %d: %s", instant(o.GetNominalDueAtUnixMicros()), o.GetOrdinal(), outcome))
	}
	if !generations {
		if n := len(in.GetGenerations()); n > 0 {
			w.row("generations kept", fmt.Sprintf("%d (--generations lists them)", n))
		}
		return w.flush()
	}
	if len(in.GetGenerations()) == 0 {
		w.row("generations kept", "none")
	}
	for _, g := range in.GetGenerations() {
		old := g.GetRecord()
		w.row(fmt.Sprintf("generation %d", old.GetGeneration()), fmt.Sprintf("%s; replaced %s by %s at revision %d after %d instants",
			specText(old.GetDefinition().GetSpec()), instant(g.GetReplacedAtUnixMicros()), g.GetReplacedBy(), old.GetRevision(), old.GetNextOrdinal()))
	}
	return w.flush()
}

// livenessState is the due coordinator's report of a schedule, "late" or "failing", or "ok"
// when it reports nothing.
func livenessState(l *orreryv1.DueLiveness) string {
	if l == nil {
		return "ok"
	}
	return l.GetState()
}

// policyName is a policy's lower-case name; when it is unspecified, the policy the silo
// applies, effective, marked as the default.
func policyName(name, prefix, effective string) string {
	if n := enumName(name, prefix); n != "unspecified" {
		return n
	}
	return effective + " (default)"
}

// catchUpText says how far back the schedule catches up: its window, or without one how far
// its misfire policy reaches.
func catchUpText(windowMicros int64, misfire orreryv1.MisfirePolicy) string {
	if windowMicros > 0 {
		return (time.Duration(windowMicros) * time.Microsecond).String()
	}
	if misfire == orreryv1.MisfirePolicy_MISFIRE_POLICY_CATCH_UP || misfire == orreryv1.MisfirePolicy_MISFIRE_POLICY_UNSPECIFIED {
		return "none: every instant already due is enqueued"
	}
	return "none"
}

// lateness says whether rec's next due instant is more than lateAfter before now while it
// still runs (not paused, cancelled or ended), and by how much.
func lateness(rec *orreryv1.ScheduleRecord, now time.Time) (bool, time.Duration) {
	due := rec.GetNextDueAtUnixMicros()
	if due == 0 || rec.GetPaused() || rec.GetCancelled() || rec.GetSeriesEnded() {
		return false, 0
	}
	by := now.Sub(time.UnixMicro(due))
	if by <= lateAfter {
		return false, 0
	}
	return true, by
}

// scheduleState names a record's lifecycle state as the list index does.
func scheduleState(rec *orreryv1.ScheduleRecord) string {
	switch {
	case rec.GetCancelled():
		return "cancelled"
	case rec.GetSeriesEnded():
		return "completed"
	case rec.GetSuspended():
		return "suspended"
	case rec.GetPaused():
		return "paused"
	}
	return "active"
}

// specText renders a schedule spec in one line.
func specText(spec *orreryv1.ScheduleSpec) string {
	switch k := spec.GetKind().(type) {
	case *orreryv1.ScheduleSpec_Cron:
		return "cron " + strconv.Quote(k.Cron.GetExpression())
	case *orreryv1.ScheduleSpec_Every:
		return fmt.Sprintf("every %v from %s", time.Duration(k.Every.GetIntervalMicros())*time.Microsecond, instant(k.Every.GetFirstDueAtUnixMicros()))
	case *orreryv1.ScheduleSpec_At:
		return "at " + instant(k.At.GetDueAtUnixMicros())
	case *orreryv1.ScheduleSpec_After:
		return fmt.Sprintf("after %v", time.Duration(k.After.GetDelayMicros())*time.Microsecond)
	}
	return ""
}

// backfillSchedule runs a schedule's instants over a past range now (ScheduleHandle.Backfill's
// loop of BackfillSchedule commands) and says how many it enqueued.
func (c *command) backfillSchedule(ctx context.Context, args []string) error {
	fs := c.flagSet("schedules backfill")
	fromFlag := fs.String("from", "", "first instant of the range, RFC 3339 (required)")
	toFlag := fs.String("to", "", "last instant of the range, RFC 3339 (default: now)")
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	lane, given, err := laneArgs("schedules backfill", rest)
	if err != nil {
		return err
	}
	from, err := time.Parse(time.RFC3339Nano, *fromFlag)
	if err != nil {
		return usagef("schedules backfill: --from: want an RFC 3339 time (2026-12-24T09:00:00Z), got %q", *fromFlag)
	}
	to := time.Now()
	if *toFlag != "" {
		if to, err = time.Parse(time.RFC3339Nano, *toFlag); err != nil {
			return usagef("schedules backfill: --to: want an RFC 3339 time, got %q", *toFlag)
		}
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	id, err := scheduleID(ctx, cl, lane, given)
	if err != nil {
		return fmt.Errorf("backfill schedule: %w", err)
	}
	m := &orreryv1.BackfillSchedule{Lane: lane, ScheduleId: id, FromUnixMicros: from.UnixMicro(), ToUnixMicros: to.UnixMicro()}
	enqueued := 0
	for {
		res, err := cl.BackfillSchedule(ctx, m)
		if err != nil {
			return fmt.Errorf("backfill schedule %s: %w", recordLabel(rest[3], id), err)
		}
		enqueued += len(res.GetEnqueuedIds())
		if m.FromUnixMicros = res.GetBackfillResumeFromUnixMicros(); m.FromUnixMicros == 0 {
			break
		}
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"action": "backfill", "schedule_id": id, "enqueued": enqueued})
	}
	_, err = fmt.Fprintf(c.stdout, "backfilled %d occurrences of %s %s\n", enqueued, strings.Join(rest[:3], "/"), id)
	return err
}

// processDue emits now, as the caller, at most --max of a partition's (or a lane's) due
// schedules of a namespace (client.ProcessDue) and says what it did.
func (c *command) processDue(ctx context.Context, args []string) error {
	fs := c.flagSet("schedules process-due")
	namespace := fs.String("namespace", "", "namespace whose due schedules are processed (required)")
	queue := fs.String("queue", "", "only this queue's schedules")
	key := fs.String("key", "", "only this lane's schedules (with --queue), in the lane's partition")
	partition := fs.Int("partition", -1, "the partition processed (required without --key)")
	maxSchedules := fs.Int("max", client.DefaultProcessDue, fmt.Sprintf("most schedules processed (1..%d)", client.MaxProcessDue))
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("schedules process-due: unexpected arguments %q", rest)
	case *namespace == "":
		return usagef("schedules process-due: --namespace is required")
	case *key != "" && *queue == "":
		return usagef("schedules process-due: --key needs --queue")
	case *key == "" && *partition < 0:
		return usagef("schedules process-due: --partition N or --queue Q --key K is required")
	case *maxSchedules < 1 || *maxSchedules > client.MaxProcessDue:
		return usagef("schedules process-due: --max must be in 1..%d, got %d", client.MaxProcessDue, *maxSchedules)
	}
	req := client.ProcessDueRequest{Namespace: *namespace, Queue: *queue, Partition: *partition, MaxSchedules: *maxSchedules}
	if *key != "" {
		req.Lane = &orreryv1.Lane{Namespace: *namespace, Queue: *queue, Key: *key}
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	done, err := cl.ProcessDue(ctx, req)
	if err != nil {
		return fmt.Errorf("process due schedules (%d processed, %d occurrences enqueued before the error): %w", done.Schedules, done.Enqueued, err)
	}
	if c.output == "json" {
		failed := []map[string]string{}
		for _, f := range done.Failed {
			failed = append(failed, map[string]string{"lane": laneString(f.Lane), "schedule_id": f.ScheduleID, "error": f.Err.Error()})
		}
		return writeJSON(c.stdout, map[string]any{"action": "process-due", "schedules": done.Schedules, "enqueued": done.Enqueued, "more": done.More, "failed": failed})
	}
	more := ""
	if done.More {
		more = "; more are due"
	}
	if _, err := fmt.Fprintf(c.stdout, "processed %d due schedules, enqueued %d occurrences%s\n", done.Schedules, done.Enqueued, more); err != nil {
		return err
	}
	for _, f := range done.Failed {
		if _, err := fmt.Fprintf(c.stdout, "  not emitted: %s %s: %v\n", laneString(f.Lane), f.ScheduleID, f.Err); err != nil {
			return err
		}
	}
	return nil
}

// laneString is a lane as NS/QUEUE/KEY.
func laneString(l *orreryv1.Lane) string {
	return l.GetNamespace() + "/" + l.GetQueue() + "/" + l.GetKey()
}

// scheduleAction pauses, resumes, triggers or deletes one schedule at whatever revision it is,
// or passes the expired occurrences it stopped at (skip-expired, as many commands as it takes).
func (c *command) scheduleAction(ctx context.Context, action string, args []string) error {
	lane, given, err := laneArgs("schedules "+action, args)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	id, err := scheduleID(ctx, cl, lane, given)
	if err != nil {
		return fmt.Errorf("%s schedule: %w", action, err)
	}
	var res *orreryv1.ScheduleResult
	switch action {
	case "pause":
		res, err = cl.PauseSchedule(ctx, &orreryv1.PauseSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
	case "resume":
		res, err = cl.ResumeSchedule(ctx, &orreryv1.ResumeSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
	case "trigger":
		res, err = cl.TriggerSchedule(ctx, &orreryv1.TriggerSchedule{Lane: lane, ScheduleId: id})
	case "delete":
		res, err = cl.DeleteSchedule(ctx, &orreryv1.DeleteSchedule{Lane: lane, ScheduleId: id, AnyRevision: true})
	case "skip-expired":
		skipped := uint32(0)
		for {
			if res, err = cl.SkipExpired(ctx, &orreryv1.SkipExpired{Lane: lane, ScheduleId: id}); err != nil || res.GetPassedWithoutMessage() == 0 {
				break
			}
			skipped += res.GetPassedWithoutMessage()
		}
		if err == nil {
			res.PassedWithoutMessage = skipped
		}
	}
	if err != nil {
		return fmt.Errorf("%s schedule %s: %w", action, recordLabel(args[3], id), err)
	}
	if c.output == "json" {
		v, err := protoValue(res)
		if err != nil {
			return err
		}
		return writeJSON(c.stdout, map[string]any{"action": action, "schedule_id": id, "result": v})
	}
	if action == "skip-expired" {
		_, err = fmt.Fprintf(c.stdout, "skipped %d expired occurrences of %s %s\n", res.GetPassedWithoutMessage(), strings.Join(args[:3], "/"), id)
		return err
	}
	past := map[string]string{"pause": "paused", "resume": "resumed", "trigger": "triggered", "delete": "deleted"}[action]
	_, err = fmt.Fprintf(c.stdout, "%s %s %s\n", past, strings.Join(args[:3], "/"), id)
	return err
}

// jitterText describes a definition's jitter: "none", or how far its occurrences may move.
func jitterText(def *orreryv1.ScheduleDefinition) string {
	j := time.Duration(def.GetJitterMicros()) * time.Microsecond
	switch {
	case j == 0:
		return "none"
	case def.GetJitterAllowEarly():
		return fmt.Sprintf("up to %v before or after each instant", j)
	default:
		return fmt.Sprintf("up to %v after each instant", j)
	}
}

// boundsText describes a definition's bounds: "none", or its start, end and max runs.
func boundsText(def *orreryv1.ScheduleDefinition) string {
	var parts []string
	if start := def.GetStartAtUnixMicros(); start != 0 {
		parts = append(parts, "from "+instant(start))
	}
	if end := def.GetEndAtUnixMicros(); end != 0 {
		parts = append(parts, "until "+instant(end))
	}
	if n := def.GetMaxOccurrences(); n != 0 {
		parts = append(parts, fmt.Sprintf("at most %d runs", n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
