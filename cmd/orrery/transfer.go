package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/grains/grants"
)

// Export writes schedule definitions as JSON lines, one ScheduleDefinition in protobuf JSON a
// line; import reads them back and creates each one. A definition carries no state: an
// exported paused schedule is imported active.

// exportSchedules writes every schedule definition of a namespace (of a queue, in a state) in
// list order.
func (c *command) exportSchedules(ctx context.Context, args []string) error {
	fs := c.flagSet("schedules export")
	var namespace, queue, state string
	fs.StringVar(&namespace, "namespace", "", "namespace to export (required)")
	fs.StringVar(&queue, "queue", "", "only this queue")
	fs.StringVar(&state, "state", "", "only schedules in this state: "+scheduleStates)
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	if namespace == "" {
		return usagef("namespace: is required")
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
	out := bufio.NewWriter(c.stdout)
	line := protojson.MarshalOptions{UseProtoNames: true}
	var after []byte
	for {
		page, next, err := cl.ListSchedules(ctx, client.ListSchedulesRequest{Namespace: namespace, Queue: queue, State: st, MaxRecords: client.MaxListMax, After: after})
		if err != nil {
			return fmt.Errorf("list schedules of namespace %q: %w", namespace, err)
		}
		for _, s := range page {
			if err := exportable(s.Record); err != nil {
				return err
			}
			b, err := line.Marshal(s.Record.GetDefinition())
			if err != nil {
				return fmt.Errorf("render schedule %s: %w", s.Record.GetDefinition().GetScheduleId(), err)
			}
			compact, err := compactJSON(b)
			if err != nil {
				return err
			}
			out.Write(compact)
			out.WriteByte('\n')
		}
		if len(next) == 0 {
			return out.Flush()
		}
		after = next
	}
}

// exportable refuses a schedule whose template the caller's read policies redacted: its
// definition as listed is not the schedule's, and importing it would create another one. A
// withheld creator does not matter, a definition carries none.
func exportable(rec *orreryv1.ScheduleRecord) error {
	var withheld []string
	for _, p := range rec.GetRedactedPaths() {
		if p != grants.CreatorPath {
			withheld = append(withheld, p)
		}
	}
	if len(withheld) == 0 {
		return nil
	}
	return fmt.Errorf("schedule %s: its template's %s are redacted for this principal; an export needs read on them",
		rec.GetDefinition().GetScheduleId(), strings.Join(withheld, ", "))
}

// compactJSON strips the insignificant spaces protojson may add.
func compactJSON(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// importOutcome is what import did with one definition.
type importOutcome struct {
	Line       int    `json:"line"`
	ScheduleID string `json:"schedule_id"`
	// Outcome is "created", "exists" or "failed".
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// importSchedules creates every definition of stdin (expected revision 0), reporting each;
// one that exists already (a RevisionConflict on the expected revision) is reported and the
// rest go on. It fails (after all of them) when
// any could not be read or created for another reason.
func (c *command) importSchedules(ctx context.Context, args []string) error {
	fs := c.flagSet("schedules import")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	dec := json.NewDecoder(c.stdin)
	var outcomes []importOutcome
	failed := 0
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("import: definition %d: %w", n, err)
		}
		o := importOutcome{Line: n}
		def := &orreryv1.ScheduleDefinition{}
		if err := protojson.Unmarshal(raw, def); err != nil {
			o.Outcome, o.Error = "failed", "not a schedule definition: "+err.Error()
		} else {
			o.ScheduleID = def.GetScheduleId()
			_, err := cl.ConfigureSchedule(ctx, def, 0)
			switch e := orrery.AsError(err); {
			case err == nil:
				o.Outcome = "created"
			case e != nil && e.Code == orrery.CodeRevisionConflict && strings.HasSuffix(e.Field, "expected_revision"):
				o.Outcome, o.Error = "exists", err.Error()
			default:
				o.Outcome, o.Error = "failed", err.Error()
			}
		}
		if o.Outcome == "failed" {
			failed++
		}
		outcomes = append(outcomes, o)
		if c.output == "table" {
			fmt.Fprintf(c.stdout, "%s %s", o.Outcome, o.ScheduleID)
			if o.Error != "" {
				fmt.Fprintf(c.stdout, ": %s", o.Error)
			}
			fmt.Fprintln(c.stdout)
		}
	}
	if c.output == "json" {
		if outcomes == nil {
			outcomes = []importOutcome{}
		}
		if err := writeJSON(c.stdout, map[string]any{"imported": outcomes}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("import: %d of %d definitions failed", failed, len(outcomes))
	}
	return nil
}
