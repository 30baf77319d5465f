package listing

import (
	"bytes"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
	"github.com/orreryhq/orrery/grains/schedule"
)

// DefaultRecords is a page's record count when the request names none; MaxRecords bounds it.
const (
	DefaultRecords = 100
	MaxRecords     = 1000
)

// MaxScanned bounds the records one filtered page (labels, name prefix) scans: a page that
// reaches it ends there, with a continuation, whatever it holds.
const MaxScanned = 10_000

// maxScanned is MaxScanned, lowered by tests (SetMaxScannedForTest).
var maxScanned = MaxScanned

// MaxPageBytes bounds the encoded records of one page a partition answers with, so that a
// page of the largest records still fits the actor transport's largest message. A page holds
// at least one record, whatever its size.
const MaxPageBytes = 4 << 20

// query is what a list request names, for either kind of record.
type query struct {
	namespace, queue string
	state            byte // 0: every state
	after            []byte
	maxRecords       int
}

// newQuery checks a request's namespace, queue, position and size.
func newQuery(namespace, queue string, state byte, after []byte, maxRecords uint32) (query, error) {
	q := query{namespace: namespace, queue: queue, state: state, after: after, maxRecords: int(maxRecords)}
	if err := input.Name("namespace", namespace, input.MaxNamespaceBytes); err != nil {
		return q, err
	}
	if queue != "" {
		if err := input.QueueName("queue", queue, true); err != nil {
			return q, err
		}
	}
	if len(after) > 0 {
		if _, _, _, err := keys.SplitListPosition(after); err != nil {
			return q, orrery.Invalid("after", "is not a list continuation")
		}
	}
	if q.maxRecords <= 0 {
		q.maxRecords = DefaultRecords
	}
	q.maxRecords = min(q.maxRecords, MaxRecords)
	return q, nil
}

// bounds is the key range a query scans under base (the namespace's record or index prefix
// without the queue): its queue's keys, from just after its position.
func (q query) bounds(base []byte) (start, end []byte) {
	start = base
	if q.queue != "" {
		start = keys.AppendString(bytes.Clone(base), q.queue)
	}
	end = kv.PrefixEnd(start)
	if len(q.after) > 0 {
		// A position is a whole (queue, key, id) tuple: no key extends it, so the first key
		// after it is at or beyond position + 0x00.
		from := append(append(bytes.Clone(base), q.after...), 0)
		if bytes.Compare(from, start) > 0 {
			start = from
		}
	}
	return start, end
}

// page collects records in key order within the query's budget.
type page struct {
	maxRecords, maxBytes int
	records, bytes       int
	last                 []byte // the position of the last record taken (or passed over)
	next                 []byte // set once a record is left for the next page
	scanned              int    // records a filtered page looked at
}

// pass records a record the filter left out at position; it reports false (and sets the
// continuation) once the page has scanned MaxScanned records.
func (p *page) pass(position []byte) bool {
	if p.scanned++; p.scanned > maxScanned {
		p.next = p.last
		return false
	}
	p.last = bytes.Clone(position)
	return true
}

// take admits one record of the given size at position, or reports false (and sets the
// continuation) when the page is full.
func (p *page) take(position []byte, size int) bool {
	if p.records == p.maxRecords || p.records > 0 && p.bytes+size > p.maxBytes {
		p.next = p.last
		return false
	}
	p.records++
	p.bytes += size
	p.last = bytes.Clone(position)
	return true
}

// scan visits the records of a query in order: from the records themselves when it names no
// state, else from the index under indexPrefix, loading each record it names. visit gets a
// record's position and encoding and returns false when the page is full. collect is how many
// index entries to read (the page size, or MaxScanned when a filter may pass records over).
func scan(r kv.Reader, q query, recordPrefix, indexPrefix []byte, collect int, visit func(position, encoded []byte) (bool, error)) error {
	if q.state == 0 {
		base := keys.RecordListPrefix(recordPrefix, q.namespace, "")
		start, end := q.bounds(base)
		return r.Scan(start, end, func(key, value []byte) (bool, error) {
			return visit(key[len(base):], value)
		})
	}
	base := keys.IndexListPrefix(indexPrefix, q.namespace, q.state, "")
	start, end := q.bounds(base)
	// Collect a page's worth of positions (and one more, to know whether more follow), then
	// load their records: no read runs inside the index scan.
	var positions [][]byte
	err := r.Scan(start, end, func(key, _ []byte) (bool, error) {
		positions = append(positions, bytes.Clone(key[len(base):]))
		return len(positions) <= collect, nil
	})
	if err != nil {
		return err
	}
	for _, position := range positions {
		queue, key, id, err := keys.SplitListPosition(position)
		if err != nil {
			return orrery.Wrap(orrery.CodeInternal, err, "listing index entry %x", position)
		}
		recordKey := keys.Of(recordPrefix, keys.LaneID(&orreryv1.Lane{Namespace: q.namespace, Queue: queue, Key: key}, id))
		encoded, found, err := r.Get(recordKey)
		if err != nil {
			return err
		}
		if !found {
			return orrery.Errorf(orrery.CodeInternal, "listing index entry %x names no record", position)
		}
		if more, err := visit(position, encoded); err != nil || !more {
			return err
		}
	}
	return nil
}

// Schedules reads one page of the partition's schedules that q names, in (queue, key, id)
// order, within maxBytes of encoded records (at most MaxPageBytes); next is set when more may
// follow (pass it as q.after). With labels or a name prefix it scans at most MaxScanned
// records, so a page may hold fewer than asked, even none, with next set. It fails Unavailable
// while the listing index does not cover every record (Ready).
func Schedules(r kv.Reader, q *orreryv1.ListSchedules, maxBytes int) (listed []*orreryv1.ListedSchedule, next []byte, err error) {
	state := q.GetState()
	if _, known := orreryv1.ScheduleState_name[int32(state)]; !known {
		return nil, nil, orrery.Invalid("state", "is not a schedule state: %d", state)
	}
	query, err := newQuery(q.GetNamespace(), q.GetQueue(), byte(state), q.GetAfter(), q.GetMaxRecords())
	if err != nil {
		return nil, nil, err
	}
	if err := requireReady(r); err != nil {
		return nil, nil, err
	}
	if err := input.Labels("labels", q.GetLabels()); err != nil {
		return nil, nil, err
	}
	filtered := len(q.GetLabels()) > 0 || q.GetNamePrefix() != ""
	collect := query.maxRecords
	if filtered {
		collect = maxScanned
	}
	p := &page{maxRecords: query.maxRecords, maxBytes: min(maxBytes, MaxPageBytes)}
	err = scan(r, query, keys.Schedule, keys.ScheduleIndex, collect, func(position, encoded []byte) (bool, error) {
		rec, err := schedule.Decode(encoded)
		if err != nil {
			return false, err
		}
		if filtered && (!strings.HasPrefix(rec.GetDefinition().GetName(), q.GetNamePrefix()) || !matchesLabels(rec.GetDefinition().GetLabels(), q.GetLabels())) {
			return p.pass(position), nil
		}
		item := &orreryv1.ListedSchedule{Record: rec, State: schedule.StateOf(rec)}
		if !p.take(position, proto.Size(item)) {
			return false, nil
		}
		listed = append(listed, item)
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return listed, p.next, nil
}

// matchesLabels reports whether labels carry every key of selector with its value (an empty
// value in selector: the key with any value).
func matchesLabels(labels, selector map[string]string) bool {
	for k, want := range selector {
		got, ok := labels[k]
		if !ok || (want != "" && got != want) {
			return false
		}
	}
	return true
}

// Sagas reads one page of the partition's sagas that q names, like Schedules.
func Sagas(r kv.Reader, q *orreryv1.ListSagas, maxBytes int) (listed []*orreryv1.SagaRecord, next []byte, err error) {
	phase := q.GetPhase()
	if _, known := orreryv1.SagaPhase_name[int32(phase)]; !known {
		return nil, nil, orrery.Invalid("phase", "is not a saga phase: %d", phase)
	}
	query, err := newQuery(q.GetNamespace(), q.GetQueue(), byte(phase), q.GetAfter(), q.GetMaxRecords())
	if err != nil {
		return nil, nil, err
	}
	if err := requireReady(r); err != nil {
		return nil, nil, err
	}
	if err := input.Labels("labels", q.GetLabels()); err != nil {
		return nil, nil, err
	}
	filtered := len(q.GetLabels()) > 0
	collect := query.maxRecords
	if filtered {
		collect = maxScanned
	}
	p := &page{maxRecords: query.maxRecords, maxBytes: min(maxBytes, MaxPageBytes)}
	err = scan(r, query, keys.Saga, keys.SagaIndex, collect, func(position, encoded []byte) (bool, error) {
		rec := &orreryv1.SagaRecord{}
		if err := record.Unmarshal(encoded, rec); err != nil {
			return false, err
		}
		if filtered && !matchesLabels(rec.GetLabels(), q.GetLabels()) {
			return p.pass(position), nil
		}
		if !p.take(position, proto.Size(rec)) {
			return false, nil
		}
		listed = append(listed, rec)
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return listed, p.next, nil
}
