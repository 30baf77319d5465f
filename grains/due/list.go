package due

import (
	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// Bounds of a List page.
const (
	// DefaultListRefs is a page's refs when the query asks for none.
	DefaultListRefs = 100
	// MaxListRefs is the most refs a page may ask for.
	MaxListRefs = 1000
)

// ListQuery selects the due schedules List returns: those of Namespace, of Queue when set, of
// Lane when set.
type ListQuery struct {
	Namespace, Queue string
	Lane             *orreryv1.Lane
	// MaxRefs bounds the page's refs (1..MaxListRefs).
	MaxRefs int
	// MaxScanned bounds the index entries a page reads, whatever they match (positive).
	MaxScanned int
	// After resumes a previous page: its continuation.
	After []byte
}

// matches reports whether ref is a schedule q selects.
func (q ListQuery) matches(ref *orreryv1.DueRef) bool {
	lane := ref.GetLane()
	switch {
	case ref.GetKind() != orreryv1.DueKind_DUE_KIND_SCHEDULE, lane.GetNamespace() != q.Namespace:
		return false
	case q.Lane != nil:
		return lane.GetQueue() == q.Lane.GetQueue() && lane.GetKey() == q.Lane.GetKey()
	case q.Queue != "":
		return lane.GetQueue() == q.Queue
	}
	return true
}

// List reads the due index oldest first up to loggedNow and returns the refs of the schedules
// q selects, at most q.MaxRefs, having read at most q.MaxScanned entries. next resumes the
// read when it stopped at either bound (a page may then hold fewer refs than asked, even
// none); it is nil once every entry due by loggedNow was read. A schedule's ref carries its
// generation as its token, the expected generation of an EmitOccurrences that emits it.
func List(r kv.Reader, loggedNowMicros int64, q ListQuery) (refs []*orreryv1.DueRef, next []byte, err error) {
	switch {
	case q.MaxRefs <= 0 || q.MaxRefs > MaxListRefs:
		return nil, nil, orrery.Invalid("max_refs", "must be in 1..%d, got %d", MaxListRefs, q.MaxRefs)
	case q.MaxScanned <= 0:
		return nil, nil, orrery.Invalid("max_scanned", "must be positive, got %d", q.MaxScanned)
	}
	start := keys.Of(keys.Due, nil)
	if q.After != nil {
		start = append(append([]byte(nil), q.After...), 0)
	}
	scanned := 0
	var last []byte // the last key read: where a page stopped by a bound resumes
	var decodeErr error
	err = r.Scan(start, kv.PrefixEnd(keys.Due), func(key, value []byte) (bool, error) {
		if at, ok := DueAtOfKey(key); ok && at > loggedNowMicros {
			return false, nil
		}
		if len(refs) >= q.MaxRefs || scanned >= q.MaxScanned { // both positive: last is set
			next = last
			return false, nil
		}
		scanned++
		last = append(last[:0], key...)
		ref := &orreryv1.DueRef{}
		if err := proto.Unmarshal(value, ref); err != nil {
			decodeErr = orrery.Wrap(orrery.CodeInternal, err, "decode due ref")
			return false, nil
		}
		if ref.GetDueAtUnixMicros() <= loggedNowMicros && q.matches(ref) {
			refs = append(refs, ref)
		}
		return true, nil
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, nil, err
	}
	return refs, next, nil
}
