package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
)

// DefaultListMax is a list page's size when ListSchedulesRequest or ListSagasRequest asks for
// 0; MaxListMax bounds it.
const (
	DefaultListMax = 100
	MaxListMax     = 1000
)

// ListSchedulesRequest names one page of a namespace's schedules.
type ListSchedulesRequest struct {
	Namespace string
	// Queue, when set, lists only the schedules of that queue.
	Queue string
	// State, when set, lists only the schedules in that state.
	State orreryv1.ScheduleState
	// MaxRecords is the page size (0: DefaultListMax; at most MaxListMax).
	MaxRecords int
	// After resumes a previous list with its continuation, under the same filter.
	After []byte
	// Labels, when set, lists only the schedules carrying every one of these labels with the
	// value given (an empty value: the label with any value); NamePrefix only those whose name
	// begins with it. A filtered page may hold fewer schedules than MaxRecords.
	Labels     map[string]string
	NamePrefix string
}

// ListSagasRequest names one page of a namespace's sagas.
type ListSagasRequest struct {
	Namespace string
	// Queue, when set, lists only the sagas of that queue.
	Queue string
	// Phase, when set, lists only the sagas in that phase.
	Phase orreryv1.SagaPhase
	// Labels, when set, lists only the sagas carrying every one of these labels (an empty
	// value: the label with any value). A filtered page may hold fewer sagas than MaxRecords.
	Labels map[string]string
	// MaxRecords is the page size (0: DefaultListMax; at most MaxListMax).
	MaxRecords int
	// After resumes a previous list with its continuation, under the same filter.
	After []byte
}

// ListedSchedule is one schedule of a list, with the state it is listed under and the
// partition it lives in.
type ListedSchedule struct {
	Partition int
	State     orreryv1.ScheduleState
	Record    *orreryv1.ScheduleRecord
}

// ListedSaga is one saga of a list, with the partition it lives in.
type ListedSaga struct {
	Partition int
	Record    *orreryv1.SagaRecord
}

// ListSchedules reads one page of a namespace's schedules from every partition, merged in
// (queue, key, id) order (keys.ListPosition). It is never silently partial: every partition
// answers or the call fails, and continuation is non-nil when more may follow; pass it as
// ListSchedulesRequest.After. The continuation holds each partition's position and is valid
// only with the same filter and partition count.
func (c *Client) ListSchedules(ctx context.Context, req ListSchedulesRequest) (page []ListedSchedule, continuation []byte, err error) {
	items, next, err := c.list(ctx, req.MaxRecords, req.After, func(p int, after []byte, max uint32) ([]listItem, []byte, error) {
		reply, err := c.inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListSchedules{ListSchedules: &orreryv1.ListSchedules{
			Namespace: req.Namespace, Queue: req.Queue, State: req.State, After: after, MaxRecords: max,
			Labels: req.Labels, NamePrefix: req.NamePrefix,
		}}})
		if err != nil {
			return nil, nil, err
		}
		var out []listItem
		for _, s := range reply.GetListedSchedules() {
			def := s.GetRecord().GetDefinition()
			out = append(out, listItem{position: keys.ListPosition(def.GetLane(), def.GetScheduleId()),
				value: ListedSchedule{Partition: p, State: s.GetState(), Record: s.GetRecord()}})
		}
		return out, reply.GetListContinuation(), nil
	})
	for _, item := range items {
		page = append(page, item.value.(ListedSchedule))
	}
	return page, next, err
}

// ListSagas reads one page of a namespace's sagas from every partition, merged in (queue, key,
// id) order, like ListSchedules.
func (c *Client) ListSagas(ctx context.Context, req ListSagasRequest) (page []ListedSaga, continuation []byte, err error) {
	items, next, err := c.list(ctx, req.MaxRecords, req.After, func(p int, after []byte, max uint32) ([]listItem, []byte, error) {
		reply, err := c.inspect(ctx, p, &orreryv1.InspectRequest{Target: &orreryv1.InspectRequest_ListSagas{ListSagas: &orreryv1.ListSagas{
			Namespace: req.Namespace, Queue: req.Queue, Phase: req.Phase, After: after, MaxRecords: max, Labels: req.Labels,
		}}})
		if err != nil {
			return nil, nil, err
		}
		var out []listItem
		for _, s := range reply.GetListedSagas() {
			out = append(out, listItem{position: keys.ListPosition(s.GetLane(), s.GetSagaId()), value: ListedSaga{Partition: p, Record: s}})
		}
		return out, reply.GetListContinuation(), nil
	})
	for _, item := range items {
		page = append(page, item.value.(ListedSaga))
	}
	return page, next, err
}

// listItem is one record of a partition's page, at its list position.
type listItem struct {
	partition int
	position  []byte
	value     any
}

// cursor is where a list stands in one partition.
type cursor struct {
	done  bool
	after []byte // the position of the last record listed from it (nil: none yet)
}

// list asks every partition not yet done for a page of up to max records after its cursor
// (in parallel), merges the pages by position, keeps the first max and moves each
// partition's cursor to the last of its records kept: done when it answered no continuation
// and every record it sent was kept.
func (c *Client) list(ctx context.Context, maxRecords int, after []byte, fetch func(p int, after []byte, max uint32) ([]listItem, []byte, error)) ([]listItem, []byte, error) {
	return listPartitions(c.Partitions(), maxRecords, after, fetch)
}

// listPartitions is list over partitions partitions.
func listPartitions(partitions, maxRecords int, after []byte, fetch func(p int, after []byte, max uint32) ([]listItem, []byte, error)) ([]listItem, []byte, error) {
	if maxRecords < 0 || maxRecords > MaxListMax {
		return nil, nil, orrery.Invalid("max_records", "must be 0..%d, got %d", MaxListMax, maxRecords)
	}
	if maxRecords == 0 {
		maxRecords = DefaultListMax
	}
	cursors, err := decodeListToken(after, partitions)
	if err != nil {
		return nil, nil, err
	}
	type answer struct {
		items []listItem
		next  []byte
		err   error
	}
	answers := make([]answer, partitions)
	var wg sync.WaitGroup
	for p := range partitions {
		if cursors[p].done {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &answers[p]
			a.items, a.next, a.err = fetch(p, cursors[p].after, uint32(maxRecords))
			for i := range a.items {
				a.items[i].partition = p
			}
		}()
	}
	wg.Wait()
	var merged []listItem
	for _, a := range answers {
		if a.err != nil {
			return nil, nil, a.err
		}
		merged = append(merged, a.items...)
	}
	slices.SortStableFunc(merged, func(a, b listItem) int {
		if n := bytes.Compare(a.position, b.position); n != 0 {
			return n
		}
		return a.partition - b.partition
	})
	kept := merged[:min(len(merged), maxRecords)]
	taken := make([]int, partitions)
	for _, item := range kept {
		cursors[item.partition].after = item.position
		taken[item.partition]++
	}
	complete := true
	for p, a := range answers {
		if cursors[p].done {
			continue
		}
		if taken[p] == len(a.items) && len(a.next) == 0 {
			cursors[p].done = true
			continue
		}
		if taken[p] == len(a.items) {
			// Everything it answered was kept: go on from its continuation, which a filtered
			// page may have moved past records it passed over (a page of none, even).
			cursors[p].after = a.next
		}
		complete = false
	}
	if complete {
		return kept, nil, nil
	}
	return kept, encodeListToken(cursors), nil
}

// listTokenVersion is the first byte of a list continuation.
const listTokenVersion = 1

// encodeListToken writes the version, the partition count and each partition's cursor:
// 0 (not started), 1 and a length-prefixed position, or 2 (done).
func encodeListToken(cursors []cursor) []byte {
	token := binary.AppendUvarint([]byte{listTokenVersion}, uint64(len(cursors)))
	for _, c := range cursors {
		switch {
		case c.done:
			token = append(token, 2)
		case c.after == nil:
			token = append(token, 0)
		default:
			token = binary.AppendUvarint(append(token, 1), uint64(len(c.after)))
			token = append(token, c.after...)
		}
	}
	return token
}

// decodeListToken reads a continuation of a list over partitions partitions (nil: the start).
func decodeListToken(token []byte, partitions int) ([]cursor, error) {
	cursors := make([]cursor, partitions)
	if len(token) == 0 {
		return cursors, nil
	}
	bad := orrery.Invalid("after", "is not a list continuation of this cluster")
	if token[0] != listTokenVersion {
		return nil, bad
	}
	n, size := binary.Uvarint(token[1:])
	if size <= 0 || n != uint64(partitions) {
		return nil, bad
	}
	rest := token[1+size:]
	for p := range cursors {
		if len(rest) == 0 {
			return nil, bad
		}
		kind := rest[0]
		rest = rest[1:]
		switch kind {
		case 0:
		case 2:
			cursors[p].done = true
		case 1:
			l, size := binary.Uvarint(rest)
			if size <= 0 || uint64(len(rest)-size) < l || l == 0 {
				return nil, bad
			}
			cursors[p].after = bytes.Clone(rest[size : size+int(l)])
			rest = rest[size+int(l):]
		default:
			return nil, bad
		}
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return cursors, nil
}
