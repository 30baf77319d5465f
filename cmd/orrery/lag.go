package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// lagRow is one partition's lag: how late its due work is, and with --queue how long its
// oldest visible message of the queue has waited.
type lagRow struct {
	partition int
	silo      string
	due       time.Duration // now − the partition's next due instant, when that is past
	pending   uint32
	queueAge  time.Duration // the queue's oldest visible message's age
	queued    uint64        // the queue's visible messages
	err       error
}

// lag prints, for every partition, how far its due work is behind (the next due instant it
// has not emitted yet, against now) and its pending commands, and with --namespace and --queue
// the queue's visible messages and the age of its oldest one. With --fail-over it exits 1 when
// any lag passes the bound, for scripts and probes.
func (c *command) lag(ctx context.Context, args []string) error {
	fs := c.flagSet("lag")
	namespace := fs.String("namespace", "", "namespace of --queue")
	queue := fs.String("queue", "", "also show this queue's backlog per partition (with --namespace)")
	failOver := fs.Duration("fail-over", 0, "exit 1 when a due lag or a queue's oldest message is older than this (0: never)")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	if (*namespace == "") != (*queue == "") {
		return usagef("lag: --namespace and --queue go together")
	}
	if *failOver < 0 {
		return usagef("fail-over: must not be negative, got %v", *failOver)
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	now := time.Now()
	rows := make([]lagRow, cl.Partitions())
	for p := range rows {
		rows[p] = lagRow{partition: p}
		st, err := cl.PartitionStatus(ctx, p)
		if err != nil {
			rows[p].err = err
			continue
		}
		rows[p].silo, rows[p].pending = st.GetSilo(), st.GetPendingCommands()
		if due := st.GetNextDueAtUnixMicros(); due != 0 && time.UnixMicro(due).Before(now) {
			rows[p].due = now.Sub(time.UnixMicro(due))
		}
	}
	if *queue != "" {
		shares, err := cl.QueueStats(ctx, *namespace, *queue, "")
		if err != nil {
			return fmt.Errorf("stats of queue %s/%s: %w", *namespace, *queue, err)
		}
		for _, s := range shares {
			if s.Partition >= 0 && s.Partition < len(rows) {
				rows[s.Partition].queued = s.Stats.GetVisible()
				rows[s.Partition].queueAge, _ = visibleAge(s.Stats)
			}
		}
	}
	over := 0
	for _, r := range rows {
		if r.err != nil || (*failOver > 0 && (r.due > *failOver || r.queueAge > *failOver)) {
			over++
		}
	}
	if err := c.printLag(rows, *queue != ""); err != nil {
		return err
	}
	if *failOver > 0 && over > 0 {
		return fmt.Errorf("%d of %d partitions are behind by more than %v or did not answer", over, len(rows), *failOver)
	}
	return nil
}

// printLag writes the rows as a table or JSON.
func (c *command) printLag(rows []lagRow, withQueue bool) error {
	if c.output == "json" {
		items := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			item := map[string]any{"partition": r.partition, "silo": r.silo, "due_lag_seconds": r.due.Seconds(), "pending_commands": r.pending}
			if withQueue {
				item["visible"], item["oldest_visible_age_seconds"] = r.queued, r.queueAge.Seconds()
			}
			if r.err != nil {
				item["error"] = r.err.Error()
			}
			items = append(items, item)
		}
		return writeJSON(c.stdout, map[string]any{"partitions": items})
	}
	columns := []string{"PARTITION", "SILO", "DUE LAG", "PENDING"}
	if withQueue {
		columns = append(columns, "VISIBLE", "OLDEST VISIBLE AGE")
	}
	t := newTable(c.stdout, append(columns, "ERROR")...)
	for _, r := range rows {
		cells := []string{strconv.Itoa(r.partition), r.silo, r.due.Round(time.Millisecond).String(), strconv.FormatUint(uint64(r.pending), 10)}
		if withQueue {
			cells = append(cells, strconv.FormatUint(r.queued, 10), r.queueAge.Round(time.Millisecond).String())
		}
		errText := "" // the table writes an empty cell as "-"
		if r.err != nil {
			errText = r.err.Error()
		}
		t.row(append(cells, errText)...)
	}
	return t.flush()
}
