package queue

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// startMicros is an arbitrary logged time (2023-11-14T22:13:20Z).
const startMicros int64 = 1_700_000_000_000_000

const (
	testNamespace = "ns"
	testQueue     = "jobs"
	deadQueue     = testQueue + input.DeadLetterSuffix
)

func laneOf(queue, key string) *orreryv1.Lane {
	return &orreryv1.Lane{Namespace: testNamespace, Queue: queue, Key: key}
}

// failer is what the helpers need of a *testing.T or a *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// bundle is one test's store, limits and logged time.
type bundle struct {
	t     failer
	store *kv.Memory
	lim   input.Limits
	now   int64
}

func setup(t failer) *bundle {
	return &bundle{t: t, store: kv.NewMemory(), lim: input.DefaultLimits(), now: startMicros}
}

func (b *bundle) advance(micros int64) { b.now += micros }

// enqueue enqueues id in lane key "k" of the test queue and requires success.
func (b *bundle) enqueue(id string, edit ...func(*orreryv1.Enqueue)) *orreryv1.EnqueueResult {
	b.t.Helper()
	m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: id, PayloadJson: `{"id":"` + id + `"}`}
	for _, e := range edit {
		e(m)
	}
	res, err := ApplyEnqueue(b.store, b.lim, m, b.now, CompareOrReturn)
	if err != nil {
		b.t.Fatalf("enqueue %q: %v", id, err)
	}
	b.check()
	return res
}

// receive receives up to maxMessages of queue with the default lease and requires success.
func (b *bundle) receive(queue string, maxMessages uint32) []*orreryv1.QueueMessage {
	b.t.Helper()
	res, err := ApplyReceive(b.store, b.lim, &orreryv1.Receive{Namespace: testNamespace, Queue: queue, Max: maxMessages, Owner: "worker-1"}, b.now)
	if err != nil {
		b.t.Fatalf("receive %s: %v", queue, err)
	}
	b.check()
	return res.GetMessages()
}

func (b *bundle) message(lane *orreryv1.Lane, id string) (*orreryv1.QueueMessage, bool) {
	b.t.Helper()
	msg, found, err := loadMessage(b.store, lane, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return msg, found
}

func (b *bundle) tombstone(lane *orreryv1.Lane, id string) (*orreryv1.MessageTombstone, bool) {
	b.t.Helper()
	raw, found, err := b.store.Get(keys.MessageTombstoneKey(lane, id))
	if err != nil {
		b.t.Fatal(err)
	}
	ts := &orreryv1.MessageTombstone{}
	if err := proto.Unmarshal(raw, ts); err != nil {
		b.t.Fatal(err)
	}
	return ts, found
}

func (b *bundle) counters(lane *orreryv1.Lane) (messages, bytes uint64) {
	b.t.Helper()
	c, err := LoadCounters(b.store, lane)
	if err != nil {
		b.t.Fatal(err)
	}
	return c.GetMessages(), c.GetBytes()
}

func (b *bundle) check() {
	b.t.Helper()
	if err := checkInvariants(b.store); err != nil {
		b.t.Fatal(err)
	}
}

// checkInvariants recounts the store: every lane's counters equal its live messages, no
// counters record exists for an empty lane, every live message has exactly the index entry
// its state implies and no tombstone, and every index entry points at such a message.
func checkInvariants(store *kv.Memory) error {
	type laneCount struct{ messages, bytes uint64 }
	counts := map[string]*laneCount{}
	var laneOrder []string
	banded := map[string][]int32{} // per queue prefix, the priorities of its banded messages
	live := 0
	err := kv.ScanPrefix(store, keys.Message, func(key, value []byte) (bool, error) {
		msg := &orreryv1.QueueMessage{}
		if err := proto.Unmarshal(value, msg); err != nil {
			return false, err
		}
		if !bytes.Equal(key, keys.MessageKey(msg.GetLane(), msg.GetId())) {
			return false, fmt.Errorf("message %q stored under a foreign key %x", msg.GetId(), key)
		}
		index, found, err := store.Get(visibilityKey(msg))
		if err != nil {
			return false, err
		}
		if !found || !bytes.Equal(index, key) {
			return false, fmt.Errorf("message %q has no index entry at %x", msg.GetId(), visibilityKey(msg))
		}
		if _, dead, _ := store.Get(keys.MessageTombstoneKey(msg.GetLane(), msg.GetId())); dead {
			return false, fmt.Errorf("live message %q also has a tombstone", msg.GetId())
		}
		lk := string(keys.AppendLane(nil, msg.GetLane()))
		if counts[lk] == nil {
			counts[lk] = &laneCount{}
			laneOrder = append(laneOrder, lk)
		}
		counts[lk].messages++
		counts[lk].bytes += MessageBytes(msg)
		if p := msg.GetPriority(); p > 0 {
			qk := string(keys.QueuePrefix(msg.GetLane().GetNamespace(), msg.GetLane().GetQueue()))
			banded[qk] = append(banded[qk], p)
		}
		live++
		return true, nil
	})
	if err != nil {
		return err
	}
	stored := 0
	err = kv.ScanPrefix(store, keys.LaneCounters, func(key, value []byte) (bool, error) {
		c := &orreryv1.LaneCounters{}
		if err := proto.Unmarshal(value, c); err != nil {
			return false, err
		}
		want := counts[string(key[len(keys.LaneCounters):])]
		if want == nil {
			return false, fmt.Errorf("counters %v kept for an empty lane %x", c, key)
		}
		if c.GetMessages() != want.messages || c.GetBytes() != want.bytes {
			return false, fmt.Errorf("lane %x counts %d messages/%d bytes, recount gives %d/%d", key, c.GetMessages(), c.GetBytes(), want.messages, want.bytes)
		}
		stored++
		return true, nil
	})
	if err != nil {
		return err
	}
	if stored != len(laneOrder) {
		return fmt.Errorf("%d lanes hold messages but %d have counters", len(laneOrder), stored)
	}
	entries := 0
	directories := 0
	err = kv.ScanPrefix(store, keys.Visibility, func(key, value []byte) (bool, error) {
		if queuePrefix, ok := keys.PriorityBandsQueuePrefix(key); ok {
			held, err := keys.DecodePriorityBands(value)
			if err != nil {
				return false, err
			}
			var want [keys.MaxPriority + 1]uint64
			for _, p := range banded[string(queuePrefix)] {
				want[p]++
			}
			if held != want {
				return false, fmt.Errorf("band directory %x holds %v, recount gives %v", key, held, want)
			}
			directories++
			return true, nil
		}
		if _, found, err := store.Get(value); err != nil || !found {
			return false, fmt.Errorf("index entry %x points at no message (%v)", key, err)
		}
		entries++
		return true, nil
	})
	if err != nil {
		return err
	}
	if entries != live {
		return fmt.Errorf("%d index entries for %d live messages", entries, live)
	}
	if directories != len(banded) {
		return fmt.Errorf("%d queues hold messages of a priority above 0, %d band directories", len(banded), directories)
	}
	return checkUniqueInvariants(store)
}

// wantCode requires err to be an *orrery.Error with the code and field.
func wantCode(t failer, err error, code orrery.Code, field string) {
	t.Helper()
	var oe *orrery.Error
	if !errors.As(err, &oe) {
		t.Fatalf("got error %v, want %v on %q", err, code, field)
	}
	if oe.Code != code || oe.Field != field {
		t.Fatalf("got %v (code %v, field %q), want code %v, field %q", err, oe.Code, oe.Field, code, field)
	}
}

func ids(msgs []*orreryv1.QueueMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetId()
	}
	return out
}

func idOf(i int) string { return fmt.Sprintf("m%04d", i) }

func tombstoneKey(lane *orreryv1.Lane, id string) []byte { return keys.MessageTombstoneKey(lane, id) }
