package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// redriveChunk is how many dead letters one redrive command asks for (within the partition's
// default receive bound).
const redriveChunk = 100

// queues runs a queues subcommand.
func (c *command) queues(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("queues: a subcommand is required: stats, peek, redrive-dlq, pause, resume, retry-policy or limit")
	}
	switch args[0] {
	case "stats":
		return c.queueStats(ctx, args[1:])
	case "peek":
		return c.peekQueue(ctx, args[1:])
	case "redrive-dlq":
		return c.redriveDLQ(ctx, args[1:])
	case "pause", "resume":
		return c.pauseQueue(ctx, args[0], args[1:])
	case "retry-policy":
		return c.retryPolicy(ctx, args[1:])
	case "limit":
		return c.queueLimit(ctx, args[1:])
	}
	return usagef("queues: unknown subcommand %q", args[0])
}

// queueStats prints a queue's depth: of one lane when a key is given, else per partition and
// in total.
func (c *command) queueStats(ctx context.Context, args []string) error {
	fs := c.flagSet("queues stats")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 && len(positional) != 3 {
		return usagef("queues stats: want NAMESPACE QUEUE [KEY], got %d arguments", len(positional))
	}
	namespace, queue, key := positional[0], positional[1], ""
	if len(positional) == 3 {
		key = positional[2]
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	shares, err := cl.QueueStats(ctx, namespace, queue, key)
	if err != nil {
		return fmt.Errorf("stats of queue %s/%s: %w", namespace, queue, err)
	}
	total := &orreryv1.QueueStats{Complete: true}
	var oldestAge time.Duration
	pausedOn, retryOn := 0, 0
	for _, s := range shares {
		st := s.Stats
		if st.GetPause() != nil {
			pausedOn++
			total.Pause = st.GetPause()
		}
		if st.GetRetry() != nil {
			if retryOn == 0 {
				total.Retry = st.GetRetry() // the lowest partition's
			}
			retryOn++
		}
		total.Visible += st.GetVisible()
		total.Leased += st.GetLeased()
		total.Delayed += st.GetDelayed()
		total.DeadLettered += st.GetDeadLettered()
		total.LaneMessages += st.GetLaneMessages()
		total.LaneBytes += st.GetLaneBytes()
		total.Complete = total.Complete && st.GetComplete()
		if age, ok := visibleAge(st); ok && age >= oldestAge {
			oldestAge = age
			total.OldestVisibleAtUnixMicros = st.GetOldestVisibleAtUnixMicros()
		}
	}
	if c.output == "json" {
		items := make([]map[string]any, 0, len(shares))
		for _, s := range shares {
			v, err := protoValue(s.Stats)
			if err != nil {
				return err
			}
			items = append(items, map[string]any{"partition": s.Partition, "stats": v, "oldest_visible_age_seconds": seconds(visibleAge(s.Stats))})
		}
		return writeJSON(c.stdout, map[string]any{
			"namespace": namespace, "queue": queue, "key": key, "partitions": items,
			"total": map[string]any{
				"visible": total.Visible, "leased": total.Leased, "delayed": total.Delayed, "dead_lettered": total.DeadLettered,
				"oldest_visible_age_seconds": seconds(oldestAge, total.OldestVisibleAtUnixMicros != 0), "complete": total.Complete,
				"paused_partitions": pausedOn, "retry_policy_partitions": retryOn,
			},
		})
	}
	t := newTable(c.stdout, "PARTITION", "VISIBLE", "LEASED", "DELAYED", "DEAD-LETTERED", "OLDEST-VISIBLE-AGE", "COMPLETE", "PAUSED")
	row := func(partition string, st *orreryv1.QueueStats, age string) {
		t.row(partition, u64(st.GetVisible()), u64(st.GetLeased()), u64(st.GetDelayed()), u64(st.GetDeadLettered()),
			age, strconv.FormatBool(st.GetComplete()), pausedText(st.GetPause()))
	}
	for _, s := range shares {
		age := ""
		if a, ok := visibleAge(s.Stats); ok {
			age = a.String()
		}
		row(strconv.Itoa(s.Partition), s.Stats, age)
	}
	if len(shares) > 1 {
		age := ""
		if total.OldestVisibleAtUnixMicros != 0 {
			age = oldestAge.String()
		}
		row("total", total, age)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !total.Complete {
		fmt.Fprintln(c.stdout, "counts marked complete=false stopped at the partition's scan budget: they are lower bounds")
	}
	if line := limitsLine(shares); line != "" {
		fmt.Fprintln(c.stdout, line)
	}
	if pausedOn > 0 && key == "" {
		fmt.Fprintf(c.stdout, "paused on %d of %d partitions: receives lease nothing there (orrery queues resume %s %s)\n", pausedOn, len(shares), namespace, queue)
	}
	if retryOn > 0 && key == "" {
		fmt.Fprintf(c.stdout, "retry policy on %d of %d partitions (set by %s at %s): %s\n", retryOn, len(shares),
			total.GetRetry().GetSetBy(), instant(total.GetRetry().GetSetAtUnixMicros()), describeRetry(client.MessageRetryOf(total.GetRetry().GetPolicy())))
	}
	return nil
}

// pausedText renders a partition's pause of a queue for the stats table: empty when not paused.
func pausedText(p *orreryv1.QueuePause) string {
	if p == nil {
		return ""
	}
	text := "by " + p.GetPausedBy() + " at " + instant(p.GetPausedAtUnixMicros())
	if p.GetReason() != "" {
		text += ": " + p.GetReason()
	}
	return text
}

// pauseQueue pauses or resumes a queue's consumption on every partition (client.PauseQueue,
// ResumeQueue); a failure names the partitions not reached, and running it again is safe.
func (c *command) pauseQueue(ctx context.Context, action string, args []string) error {
	fs := c.flagSet("queues " + action)
	var reason string
	if action == "pause" {
		fs.StringVar(&reason, "reason", "", "why, recorded with the pause (optional)")
	}
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 2 {
		return usagef("queues %s: want NAMESPACE QUEUE, got %d arguments", action, len(positional))
	}
	namespace, queue := positional[0], positional[1]
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if action == "pause" {
		err = cl.PauseQueue(ctx, namespace, queue, reason)
	} else {
		err = cl.ResumeQueue(ctx, namespace, queue)
	}
	if err != nil {
		return fmt.Errorf("%s queue %s/%s: %w", action, namespace, queue, err)
	}
	if c.output == "json" {
		return writeJSON(c.stdout, map[string]any{"namespace": namespace, "queue": queue, "paused": action == "pause", "partitions": cl.Partitions()})
	}
	fmt.Fprintf(c.stdout, "%sd queue %s/%s on all %d partitions\n", action, namespace, queue, cl.Partitions())
	return nil
}

// visibleAge is how long a partition's oldest visible message has been visible, at the
// partition's logged time (rounded to the millisecond); ok is false when none is visible.
func visibleAge(st *orreryv1.QueueStats) (time.Duration, bool) {
	at := st.GetOldestVisibleAtUnixMicros()
	if at == 0 {
		return 0, false
	}
	return (time.Duration(st.GetLoggedTimeUnixMicros()-at) * time.Microsecond).Round(time.Millisecond), true
}

// seconds renders an oldest-visible age in seconds for JSON; null when nothing is visible.
func seconds(age time.Duration, visible bool) *float64 {
	if !visible {
		return nil
	}
	s := age.Seconds()
	return &s
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

// peekQueue prints up to -n messages of a lane without leasing them, in the lane's id order.
func (c *command) peekQueue(ctx context.Context, args []string) error {
	fs := c.flagSet("queues peek")
	var n int
	var after string
	fs.IntVar(&n, "n", 10, fmt.Sprintf("how many messages (1..%d)", client.DefaultInspectLaneMax*10))
	fs.StringVar(&after, "after", "", "start after this message id (a previous page's next id)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 3 {
		return usagef("queues peek: want NAMESPACE QUEUE KEY, got %d arguments", len(positional))
	}
	if n < 1 || n > client.DefaultInspectLaneMax*10 {
		return usagef("n: must be 1..%d, got %d", client.DefaultInspectLaneMax*10, n)
	}
	lane := &orreryv1.Lane{Namespace: positional[0], Queue: positional[1], Key: positional[2]}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	msgs, next, err := cl.InspectLane(ctx, lane, after, n)
	if err != nil {
		return fmt.Errorf("peek lane %s/%s/%s: %w", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), err)
	}
	if c.output == "json" {
		items := make([]json.RawMessage, 0, len(msgs))
		for _, m := range msgs {
			v, err := protoValue(m)
			if err != nil {
				return err
			}
			items = append(items, v)
		}
		var nextAfter *string
		if next != "" {
			nextAfter = &next
		}
		return writeJSON(c.stdout, map[string]any{"messages": items, "next_after": nextAfter})
	}
	t := newTable(c.stdout, "ID", "ATTEMPT", "PRIORITY", "VISIBLE-AT", "LEASED-UNTIL", "PAYLOAD-BYTES", "DEAD-LETTERED-FROM", "UNIQUE-KEY", "LAST-FAILED-AT", "LAST-ERROR")
	for _, m := range msgs {
		t.row(m.GetId(), strconv.FormatUint(uint64(m.GetDeliveryCount()), 10), strconv.Itoa(int(m.GetPriority())), instant(m.GetVisibleAtUnixMicros()),
			instant(m.GetLease().GetUntilUnixMicros()), strconv.Itoa(len(m.GetPayloadJson())), m.GetDeadLetteredFrom(), m.GetUniqueKey(),
			instant(m.GetLastFailedAtUnixMicros()), oneLine(m.GetLastError(), peekErrorChars))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "next page: --after %s\n", next)
	}
	return nil
}

// peekErrorChars is how much of a message's last error a peek's table shows (-o json shows it
// whole).
const peekErrorChars = 80

// oneLine renders s on one line of at most limit characters, its line breaks as spaces and
// what it cuts as "…".
func oneLine(s string, limit int) string {
	runes := []rune(strings.Join(strings.Fields(s), " "))
	if len(runes) <= limit {
		return string(runes)
	}
	return string(runes[:limit-1]) + "…"
}

// redriveDLQ moves a lane's dead letters back to it, one command of up to redriveChunk at a
// time, until --max have moved or none remain that can.
func (c *command) redriveDLQ(ctx context.Context, args []string) error {
	fs := c.flagSet("queues redrive-dlq")
	var maxMessages int
	fs.IntVar(&maxMessages, "max", 0, "move at most this many (0: all)")
	positional, err := c.parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 3 {
		return usagef("queues redrive-dlq: want NAMESPACE QUEUE KEY, got %d arguments", len(positional))
	}
	if maxMessages < 0 {
		return usagef("max: must not be negative, got %d", maxMessages)
	}
	lane := &orreryv1.Lane{Namespace: positional[0], Queue: positional[1], Key: positional[2]}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	var moved []string
	var left uint32
	commands := 0
	for maxMessages == 0 || len(moved) < maxMessages {
		chunk := redriveChunk
		if maxMessages > 0 {
			chunk = min(chunk, maxMessages-len(moved))
		}
		res, err := cl.RedriveDeadLetters(ctx, lane, chunk)
		if err != nil {
			return fmt.Errorf("redrive dead letters of %s/%s/%s after %d moved: %w", lane.GetNamespace(), lane.GetQueue(), lane.GetKey(), len(moved), err)
		}
		commands++
		moved = append(moved, res.GetRedrivenIds()...)
		left = res.GetSkipped()
		if !res.GetMore() || len(res.GetRedrivenIds()) == 0 {
			break
		}
	}
	if c.output == "json" {
		if moved == nil {
			moved = []string{}
		}
		return writeJSON(c.stdout, map[string]any{"redriven": len(moved), "ids": moved, "left_in_place": left, "commands": commands})
	}
	fmt.Fprintf(c.stdout, "redriven %d dead letters to %s/%s/%s\n", len(moved), lane.GetNamespace(), lane.GetQueue(), lane.GetKey())
	if left > 0 {
		fmt.Fprintf(c.stdout, "left %d in the dead-letter queue: leased there, or their id is live in the queue\n", left)
	}
	return nil
}

// parseInterspersed is parse for a command whose flags may also follow or sit between its
// positional arguments ("queues peek NS QUEUE KEY -n 5"); it returns the positional arguments.
func (c *command) parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	rest, err := c.parse(fs, args, true)
	if err != nil {
		return nil, err
	}
	var positional []string
	for len(rest) > 0 {
		positional = append(positional, rest[0])
		if err := fs.Parse(rest[1:]); err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
		}
		rest = fs.Args()
	}
	return positional, nil
}
