package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/client"
)

// sagaPhases are --phase's values.
const sagaPhases = "waiting, completed, cancelled, timed_out"

// sagas runs a sagas subcommand.
func (c *command) sagas(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("sagas: a subcommand is required: list or describe")
	}
	switch args[0] {
	case "list":
		return c.listSagas(ctx, args[1:])
	case "describe":
		return c.describeSaga(ctx, args[1:])
	}
	return usagef("sagas: unknown subcommand %q", args[0])
}

// listSagas prints one page of a namespace's sagas and the continuation of the next.
func (c *command) listSagas(ctx context.Context, args []string) error {
	fs := c.flagSet("sagas list")
	var lf listFlags
	var phase string
	lf.define(fs)
	fs.StringVar(&phase, "phase", "", "only sagas in this phase: "+sagaPhases)
	labels := labelFlag{}
	fs.Var(labels, "label", "only sagas with this label, KEY=VALUE (KEY alone: any value); repeatable")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	after, err := lf.check()
	if err != nil {
		return err
	}
	ph, err := enumFlag("phase", phase, "SAGA_PHASE_", orreryv1.SagaPhase_value, sagaPhases)
	if err != nil {
		return err
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	page, next, err := cl.ListSagas(ctx, client.ListSagasRequest{Namespace: lf.namespace, Queue: lf.queue, Phase: orreryv1.SagaPhase(ph), MaxRecords: lf.max, After: after,
		Labels: labels})
	if err != nil {
		return fmt.Errorf("list sagas of namespace %q: %w", lf.namespace, err)
	}
	if c.output == "json" {
		items := make([]map[string]any, 0, len(page))
		for _, s := range page {
			rec, err := protoValue(s.Record)
			if err != nil {
				return err
			}
			items = append(items, map[string]any{"partition": s.Partition, "record": rec})
		}
		return writeJSON(c.stdout, map[string]any{"sagas": items, "next_after": encodeToken(next)})
	}
	t := newTable(c.stdout, "QUEUE", "KEY", "ID", "PHASE", "DEADLINE", "REVISION")
	for _, s := range page {
		r := s.Record
		t.row(r.GetLane().GetQueue(), r.GetLane().GetKey(), r.GetSagaId(), enumName(r.GetPhase().String(), "SAGA_PHASE_"),
			instant(r.GetDeadlineUnixMicros()), strconv.FormatUint(r.GetRevision(), 10))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if token := encodeToken(next); token != nil {
		fmt.Fprintf(c.stdout, "next page: --after %s\n", *token)
	}
	return nil
}

// describeSaga prints one saga record and its owning partition.
func (c *command) describeSaga(ctx context.Context, args []string) error {
	lane, given, err := laneArgs("sagas describe", args)
	if err != nil {
		return err
	}
	id := sagaID(lane.GetNamespace(), given)
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.InspectSaga(ctx, lane, id)
	if err != nil {
		return fmt.Errorf("describe saga %s: %w", recordLabel(args[3], id), err)
	}
	partition := cl.PartitionOf(lane)
	if c.output == "json" {
		v, err := protoValue(rec)
		if err != nil {
			return err
		}
		return writeJSON(c.stdout, map[string]any{"record": v, "partition": partition})
	}
	w := newTable(c.stdout, "FIELD", "VALUE")
	w.row("saga", rec.GetSagaId())
	w.row("lane", lane.GetNamespace()+"/"+lane.GetQueue()+"/"+lane.GetKey())
	w.row("phase", enumName(rec.GetPhase().String(), "SAGA_PHASE_"))
	w.row("revision", strconv.FormatUint(rec.GetRevision(), 10))
	w.row("deadline", instant(rec.GetDeadlineUnixMicros()))
	if to := rec.GetTimeout(); to != nil {
		w.row("timeout queue", to.GetQueue())
	}
	w.row("timeout message", rec.GetTimeoutMessageId())
	w.row("creator", rec.GetCreator())
	w.row("state", rec.GetStateJson())
	w.row("redacted", strings.Join(rec.GetRedactedPaths(), ", "))
	w.row("partition", strconv.Itoa(partition))
	return w.flush()
}
