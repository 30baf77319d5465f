package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// defineFlags are the flags of schedules create and update: the lane, the spec and the
// template, each remembered as given or not (update changes only the ones given).
type defineFlags struct {
	namespace, queue, key              string
	cron, tz, every, start, at, after  string
	payload, headers, misfire, overlap string
	expired, pace                      string
	labels                             labelFlag
	retry                              retryFlags
	calendars                          stringsFlag
	catchUp, ttl, jitter               time.Duration
	maxDeliveries, maxRuns, priority   int
	pauseOnFailure, jitterEarly        bool
	end                                string
	set                                map[string]bool
}

// define adds the flags to fs.
func (f *defineFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "namespace", "", "namespace (required)")
	fs.StringVar(&f.queue, "queue", "", "queue the occurrences land in (required)")
	fs.StringVar(&f.key, "key", "", "lane key (default: the name)")
	fs.StringVar(&f.cron, "cron", "", `cron expression, 5 or 6 fields ("0 9 * * MON-FRI", "*/10 * * * * *")`)
	fs.StringVar(&f.tz, "tz", "", "IANA time zone of --cron (default UTC)")
	fs.StringVar(&f.every, "every", "", `interval ("30s", "1h"), from --start`)
	fs.StringVar(&f.start, "start", "", "first instant of --every, or for --cron no instant before it, RFC 3339 (default: one interval from now, or now)")
	fs.StringVar(&f.end, "end", "", "no instant after it fires, RFC 3339 (default: none)")
	fs.BoolVar(&f.pauseOnFailure, "pause-on-failure", false, "pause the schedule when an occurrence is dead-lettered")
	fs.IntVar(&f.maxRuns, "max-runs", 0, "the definition's instants, fired or passed, before the schedule completes (0: no bound)")
	fs.DurationVar(&f.jitter, "jitter", 0, "fire each occurrence up to this long after its instant, at an offset derived from its id (0: none; 1ms..168h)")
	fs.BoolVar(&f.jitterEarly, "jitter-early", false, "with --jitter: the offset may also be up to --jitter before the instant")
	fs.StringVar(&f.at, "at", "", "one instant, RFC 3339")
	fs.StringVar(&f.after, "after", "", `one instant this long after the schedule is created ("10m")`)
	fs.StringVar(&f.payload, "payload", "", "payload of each occurrence, JSON")
	fs.StringVar(&f.headers, "headers", "", "headers of each occurrence, a JSON object")
	fs.StringVar(&f.misfire, "misfire", "", "misfire policy: catch_up, skip or coalesce (default catch_up)")
	fs.StringVar(&f.overlap, "overlap", "", "overlap policy: allow_all, skip, buffer_one, buffer_all or cancel_other (default allow_all)")
	f.labels = labelFlag{}
	fs.Var(f.labels, "label", "a label of the schedule, KEY=VALUE; repeatable (update: replaces them all)")
	fs.Var(&f.calendars, "calendar", "an exclusion calendar of the namespace (calendars put); repeatable (update: replaces them all)")
	fs.StringVar(&f.pace, "pace", "", `paced catch-up: at most N occurrences per window, N/DURATION ("10/1m")`)
	fs.StringVar(&f.expired, "expired", "", "an occurrence whose --ttl passed before it fired: fail (stop the schedule until skip-expired) or skip (default fail)")
	fs.DurationVar(&f.catchUp, "catch-up", 0, "how far back a catch-up or a resume reaches (0: no bound)")
	fs.DurationVar(&f.ttl, "ttl", 0, "time to live of each occurrence (0: none)")
	fs.IntVar(&f.maxDeliveries, "max-deliveries", 0, "deliveries before an occurrence is dead-lettered (0: the partition's default)")
	fs.IntVar(&f.priority, "priority", 0, "each occurrence's priority, 0..9, higher first (README \"Priorities\")")
	f.retry.define(fs, "retry-") // each occurrence's retry policy (update: replaces it whole)
}

// spec is the spec the flags name, nil when they name none; more than one is a usage error.
func (f *defineFlags) spec(now time.Time) (*orreryv1.ScheduleSpec, error) {
	var specs []*orreryv1.ScheduleSpec
	if f.set["tz"] && !f.set["cron"] {
		return nil, usagef("tz: only with --cron")
	}
	if f.set["start"] && !f.set["every"] && !f.set["cron"] {
		return nil, usagef("start: only with --every or --cron")
	}
	if f.set["cron"] {
		specs = append(specs, client.Cron(f.cron, f.tz))
	}
	if f.set["every"] {
		interval, err := time.ParseDuration(f.every)
		if err != nil {
			return nil, usagef("every: %v", err)
		}
		first := now.Add(interval).Truncate(time.Second)
		if f.set["start"] {
			if first, err = time.Parse(time.RFC3339Nano, f.start); err != nil {
				return nil, usagef("start: want an RFC 3339 time (2026-12-24T09:00:00Z), got %q", f.start)
			}
		}
		specs = append(specs, client.Every(interval, first))
	}
	if f.set["at"] {
		at, err := time.Parse(time.RFC3339Nano, f.at)
		if err != nil {
			return nil, usagef("at: want an RFC 3339 time (2026-12-24T09:00:00Z), got %q", f.at)
		}
		specs = append(specs, client.At(at))
	}
	if f.set["after"] {
		delay, err := time.ParseDuration(f.after)
		if err != nil {
			return nil, usagef("after: %v", err)
		}
		specs = append(specs, client.After(delay))
	}
	if len(specs) > 1 {
		return nil, usagef("give one of --cron, --every, --at and --after")
	}
	if len(specs) == 0 {
		return nil, nil
	}
	return specs[0], nil
}

// apply sets the options the flags give on o (all of them for create, the ones given for
// update).
func (f *defineFlags) apply(o *client.ScheduleOptions, spec *orreryv1.ScheduleSpec) error {
	if spec != nil {
		o.Spec = spec
	}
	if f.set["payload"] {
		o.PayloadJSON = f.payload
	}
	if f.set["headers"] {
		o.HeadersJSON = f.headers
	}
	if f.set["misfire"] {
		n, err := enumFlag("misfire", f.misfire, "MISFIRE_POLICY_", orreryv1.MisfirePolicy_value, "catch_up, skip, coalesce")
		if err != nil {
			return err
		}
		o.Misfire = client.MisfirePolicy(n)
	}
	if f.set["overlap"] {
		n, err := enumFlag("overlap", f.overlap, "OVERLAP_POLICY_", orreryv1.OverlapPolicy_value, "allow_all, skip, buffer_one, buffer_all, cancel_other")
		if err != nil {
			return err
		}
		o.Overlap = client.OverlapPolicy(n)
	}
	if f.set["label"] {
		o.Labels = map[string]string(f.labels)
	}
	if f.set["calendar"] {
		o.Calendars = []string(f.calendars)
	}
	if f.set["pace"] {
		n, window, ok := strings.Cut(f.pace, "/")
		per, err := strconv.Atoi(n)
		d, derr := time.ParseDuration(window)
		if !ok || err != nil || derr != nil {
			return usagef("pace: want N/DURATION (10/1m), got %q", f.pace)
		}
		o.PacePerWindow, o.PaceWindow = per, d
	}
	if f.set["expired"] {
		n, err := enumFlag("expired", f.expired, "EXPIRED_POLICY_", orreryv1.ExpiredPolicy_value, "fail, skip")
		if err != nil {
			return err
		}
		o.Expired = client.ExpiredPolicy(n)
	}
	if f.set["catch-up"] {
		o.CatchUpWindow = f.catchUp
	}
	if f.set["ttl"] {
		o.TimeToLive = f.ttl
	}
	if f.set["max-deliveries"] {
		o.MaxDeliveries = f.maxDeliveries
	}
	if f.set["priority"] {
		o.Priority = f.priority
	}
	if f.retry.given(f.set) {
		policy, err := f.retry.policy(f.set)
		if err != nil {
			return err
		}
		o.Retry = policy
	}
	if f.set["start"] && f.set["cron"] {
		start, err := time.Parse(time.RFC3339Nano, f.start)
		if err != nil {
			return usagef("start: want an RFC 3339 time (2026-12-24T09:00:00Z), got %q", f.start)
		}
		o.StartAt = start
	}
	if f.set["end"] {
		end, err := time.Parse(time.RFC3339Nano, f.end)
		if err != nil {
			return usagef("end: want an RFC 3339 time (2026-12-24T09:00:00Z), got %q", f.end)
		}
		o.EndAt = end
	}
	if f.set["max-runs"] {
		o.MaxOccurrences = f.maxRuns
	}
	if f.set["pause-on-failure"] {
		o.PauseOnFailure = f.pauseOnFailure
	}
	if f.set["jitter"] {
		o.Jitter = f.jitter
	}
	if f.set["jitter-early"] {
		o.JitterEarly = f.jitterEarly
	}
	return nil
}

// defineSchedule runs schedules create (a new schedule named NAME) or update (the schedule
// named NAME, changing only what the flags give, at the revision it reads, retried when an
// emission moved it), and prints the schedule as it then is.
func (c *command) defineSchedule(ctx context.Context, action string, args []string) error {
	fs := c.flagSet("schedules " + action)
	f := &defineFlags{set: map[string]bool{}}
	f.define(fs)
	var names []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // NAME first: the flag package stops at it
		names, args = args[:1], args[1:]
	}
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if names = append(names, rest...); len(names) != 1 {
		return usagef("schedules %s: want one NAME and flags (orrery schedules help), got arguments %q", action, names)
	}
	name := names[0]
	if f.namespace == "" || f.queue == "" {
		return usagef("schedules %s: --namespace and --queue are required", action)
	}
	spec, err := f.spec(time.Now())
	if err != nil {
		return err
	}
	if action == "create" && spec == nil {
		return usagef("schedules create: give one of --cron, --every, --at and --after")
	}
	o := client.ScheduleOptions{Queue: f.queue, Key: f.key}
	if err := f.apply(&o, spec); err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	schedules := cl.Schedules(f.namespace)
	h := schedules.Handle(f.queue, f.key, name)
	var created *client.ScheduleHandle
	if action == "create" {
		created, err = schedules.Create(ctx, name, o)
	} else {
		err = h.Update(ctx, func(cur *client.ScheduleOptions) { _ = f.apply(cur, spec) })
	}
	if err != nil {
		return fmt.Errorf("%s schedule %q: %w", action, name, err)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		return fmt.Errorf("describe schedule %q: %w", name, err)
	}
	past := map[string]string{"create": "created", "update": "updated"}[action]
	written, _ := h.LastWrite()
	if created != nil {
		written, _ = created.LastWrite()
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"action": action, "name": name, "schedule_id": d.ID,
			"lane":     map[string]string{"namespace": f.namespace, "queue": f.queue, "key": d.Options.Key},
			"revision": d.Revision, "generation": d.Generation, "next_due": jsonTime(d.NextDue),
			"already_due": written.AlreadyDue, "first_already_due": jsonTime(written.FirstAlreadyDue), "last_already_due": jsonTime(written.LastAlreadyDue)})
	}
	if _, err := fmt.Fprintf(c.stdout, "%s schedule %q %s in %s/%s/%s, generation %d, next due %s\n",
		past, name, d.ID, f.namespace, f.queue, d.Options.Key, d.Generation, timeOrNone(d.NextDue)); err != nil {
		return err
	}
	if written.AlreadyDue > 0 {
		_, err = fmt.Fprintf(c.stdout, "%d instants were already due, %s to %s: the catch-up enqueues them now (catch-up window: %s)\n",
			written.AlreadyDue, timeOrNone(written.FirstAlreadyDue), timeOrNone(written.LastAlreadyDue),
			catchUpText(d.Options.CatchUpWindow.Microseconds(), d.Options.Misfire))
	}
	return err
}

// jsonTime is t in RFC 3339 for JSON output, nil when zero.
func jsonTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// timeOrNone is t in RFC 3339, or "none" when zero.
func timeOrNone(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}
