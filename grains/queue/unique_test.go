package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
)

// uniqueBy returns an edit that enqueues with unique key key held for period (0: while live).
func uniqueBy(key string, periodMicros int64) func(*orreryv1.Enqueue) {
	return func(e *orreryv1.Enqueue) {
		e.Unique = &orreryv1.UniqueSpec{Key: key, PeriodMicros: periodMicros}
	}
}

// duplicate requires an enqueue of id with edits to be skipped as a duplicate of holder,
// writing nothing.
func (b *bundle) duplicate(id, holder string, edit ...func(*orreryv1.Enqueue)) {
	b.t.Helper()
	before := b.store.Clone()
	m := &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: id, PayloadJson: `{"id":"` + id + `"}`}
	for _, e := range edit {
		e(m)
	}
	res, err := ApplyEnqueue(b.store, b.lim, m, b.now, CompareOrReturn)
	if err != nil || res.GetCreated() || res.GetDuplicateOf() != holder || res.GetId() != id {
		b.t.Fatalf("enqueue %s: %v %v, want a duplicate of %s", id, res, err, holder)
	}
	if !b.store.Equal(before) {
		b.t.Fatalf("enqueue %s, a duplicate of %s, wrote", id, holder)
	}
}

// created requires an enqueue of id with edits to store it.
func (b *bundle) created(id string, edit ...func(*orreryv1.Enqueue)) {
	b.t.Helper()
	if res := b.enqueue(id, edit...); !res.GetCreated() || res.GetDuplicateOf() != "" {
		b.t.Fatalf("enqueue %s: %v, want it created", id, res)
	}
}

// uniqueRecord reads the lane's record of key.
func (b *bundle) uniqueRecord(lane *orreryv1.Lane, key string) (*orreryv1.UniqueRecord, bool) {
	b.t.Helper()
	raw, found, err := b.store.Get(keys.UniqueKey(lane, key))
	if err != nil {
		b.t.Fatal(err)
	}
	rec := &orreryv1.UniqueRecord{}
	if err := proto.Unmarshal(raw, rec); err != nil {
		b.t.Fatal(err)
	}
	return rec, found
}

// TestUniqueKeyHeldWhileLive: a key held while live refuses every other message with the key
// (as a duplicate, writing nothing) while its holder is visible, delayed or leased, and the
// holder's ack frees it at once; the next message takes it.
func TestUniqueKeyHeldWhileLive(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	b.created("a", uniqueBy("invoice-7", 0), func(e *orreryv1.Enqueue) { e.DelayMicros = input.Minute })
	if msg, _ := b.message(lane, "a"); msg.GetUniqueKey() != "invoice-7" {
		t.Fatalf("a holds unique key %q", msg.GetUniqueKey())
	}
	b.duplicate("b", "a", uniqueBy("invoice-7", 0)) // delayed
	b.advance(input.Minute)
	b.duplicate("b", "a", uniqueBy("invoice-7", 0)) // visible
	got := b.receive(testQueue, 1)
	b.duplicate("b", "a", uniqueBy("invoice-7", input.Hour)) // leased; the asker's period does not matter
	b.created("c", uniqueBy("invoice-8", 0))                 // another key
	b.created("d")                                           // no key
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: lane, Id: "a", LeaseToken: got[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	if _, found := b.uniqueRecord(lane, "invoice-7"); found {
		t.Fatal("the ack left the record of a key held while live")
	}
	b.created("b", uniqueBy("invoice-7", 0))
	if rec, _ := b.uniqueRecord(lane, "invoice-7"); rec.GetMessageId() != "b" || rec.GetHeldUntilUnixMicros() != 0 {
		t.Fatalf("record %v, want b's while live", rec)
	}
	b.duplicate("e", "b", uniqueBy("invoice-7", 0))
}

// TestUniqueKeyFreedByEveryRemoval: expiry (once passed, even before a receive removes the
// message), a cancel (of a visible message, and of a leased one at once, before its lease
// ends) and a dead-letter move each free a key held while live; the dead letter holds none.
func TestUniqueKeyFreedByEveryRemoval(t *testing.T) {
	lane := laneOf(testQueue, "k")
	t.Run("expiry", func(t *testing.T) {
		b := setup(t)
		b.created("a", uniqueBy("u", 0), func(e *orreryv1.Enqueue) { e.TimeToLiveMicros = input.Minute })
		b.duplicate("b", "a", uniqueBy("u", 0))
		b.advance(input.Minute)
		b.created("b", uniqueBy("u", 0)) // a expired, still stored
		if got := b.receive(testQueue, 10); len(got) != 1 || got[0].GetId() != "b" {
			t.Fatalf("received %v, want b (a expired)", ids(got))
		}
		if rec, _ := b.uniqueRecord(lane, "u"); rec.GetMessageId() != "b" {
			t.Fatalf("removing the expired a took b's record: %v", rec)
		}
		b.duplicate("c", "b", uniqueBy("u", 0))
	})
	t.Run("cancel", func(t *testing.T) {
		b := setup(t)
		b.created("a", uniqueBy("u", 0))
		if _, _, err := b.cancel(lane, "a"); err != nil {
			t.Fatal(err)
		}
		b.created("b", uniqueBy("u", 0))
		b.receive(testQueue, 1)
		if res, _, err := b.cancel(lane, "b"); err != nil || res.GetOutcome() != orreryv1.CancelOutcome_CANCEL_OUTCOME_LEASE_REVOKED {
			t.Fatalf("cancel of leased b: %v %v", res, err)
		}
		b.created("c", uniqueBy("u", 0)) // b is cancelled, waiting for its lease to end
		b.advance(input.Hour)
		b.receive(testQueue, 10) // removes b, delivers c
		if rec, _ := b.uniqueRecord(lane, "u"); rec.GetMessageId() != "c" {
			t.Fatalf("removing the cancelled b took c's record: %v", rec)
		}
	})
	t.Run("dead letter", func(t *testing.T) {
		b := setup(t)
		b.created("a", uniqueBy("u", 0), func(e *orreryv1.Enqueue) { e.MaxDeliveries = 1 })
		b.receive(testQueue, 1)
		b.advance(input.Hour)
		if got := b.receive(testQueue, 1); len(got) != 0 {
			t.Fatalf("received %v, want a dead-lettered", ids(got))
		}
		dead, found := b.message(laneOf(deadQueue, "k"), "a")
		if !found || dead.GetUniqueKey() != "" {
			t.Fatalf("dead letter %v (found %v), want it without a unique key", dead, found)
		}
		b.created("b", uniqueBy("u", 0))
		if res, err := ApplyRedrive(b.store, b.lim, &orreryv1.RedriveDeadLetters{Lane: lane}, b.now); err != nil || len(res.GetRedrivenIds()) != 1 {
			t.Fatalf("redrive: %v %v", res, err)
		}
		b.check()
		b.duplicate("c", "b", uniqueBy("u", 0)) // the redriven a took no key back
	})
}

// TestUniqueKeyHeldForAPeriod: a key held for a period stays taken after its message is acked
// and lapses at enqueue time + period; the next message takes it (a new record and lapse
// index entry, the old entry gone), and PruneUniques removes lapsed records, oldest first,
// within its bound.
func TestUniqueKeyHeldForAPeriod(t *testing.T) {
	b := setup(t)
	lane := laneOf(testQueue, "k")
	start := b.now
	b.created("a", uniqueBy("u", 10*input.Second))
	got := b.receive(testQueue, 1)
	if _, _, err := ApplyAck(b.store, b.lim, &orreryv1.Ack{Lane: lane, Id: "a", LeaseToken: got[0].GetLease().GetToken()}, b.now); err != nil {
		t.Fatal(err)
	}
	b.check()
	b.advance(10*input.Second - 1)
	b.duplicate("b", "a", uniqueBy("u", 0))
	b.advance(1)
	b.created("b", uniqueBy("u", 0))
	if _, found, _ := b.store.Get(keys.UniqueLapseKey(start+10*input.Second, lane, "u")); found {
		t.Fatal("the replaced record's lapse entry stayed")
	}
	// Three period records lapsing at different instants, in other lanes.
	for i, period := range []int64{3, 1, 2} {
		b.created(fmt.Sprintf("p%d", i), uniqueBy("u", period*input.Second), func(e *orreryv1.Enqueue) { e.Lane = laneOf(testQueue, fmt.Sprintf("k%d", i)) })
	}
	b.advance(2 * input.Second)
	removed, more, err := PruneUniques(b.store, b.now, 1)
	if err != nil || removed != 1 || !more {
		t.Fatalf("prune with room for one: %d %v %v, want 1 and more", removed, more, err)
	}
	if _, found := b.uniqueRecord(laneOf(testQueue, "k1"), "u"); found {
		t.Fatal("the record that lapsed first stayed")
	}
	removed, more, err = PruneUniques(b.store, b.now, 10)
	if err != nil || removed != 1 || more {
		t.Fatalf("prune: %d %v %v, want the one more lapsed record", removed, more, err)
	}
	b.check()
	if _, found := b.uniqueRecord(laneOf(testQueue, "k0"), "u"); !found {
		t.Fatal("a record still in force was pruned")
	}
	if rec, found := b.uniqueRecord(lane, "u"); !found || rec.GetMessageId() != "b" {
		t.Fatal("a record held while live was pruned")
	}
}

// TestUniqueByPayload: by_payload keys a message by its payload and headers: the same pair is
// a duplicate whatever the id, another payload or other headers are not.
func TestUniqueByPayload(t *testing.T) {
	b := setup(t)
	byPayload := func(payload, headers string) func(*orreryv1.Enqueue) {
		return func(e *orreryv1.Enqueue) {
			e.PayloadJson, e.HeadersJson = payload, headers
			e.Unique = &orreryv1.UniqueSpec{ByPayload: true}
		}
	}
	b.created("a", byPayload(`{"n":1}`, `{"h":1}`))
	sum := sha256.Sum256([]byte("{\"n\":1}\x00{\"h\":1}"))
	if msg, _ := b.message(laneOf(testQueue, "k"), "a"); msg.GetUniqueKey() != hex.EncodeToString(sum[:]) {
		t.Fatalf("a's key %q, want the hex SHA-256 of payload, zero byte, headers", msg.GetUniqueKey())
	}
	b.duplicate("b", "a", byPayload(`{"n":1}`, `{"h":1}`))
	b.created("c", byPayload(`{"n":2}`, `{"h":1}`))
	b.created("d", byPayload(`{"n":1}`, ""))
	b.created("e", byPayload("", `{"n":1}`)) // not d's pair, though the texts join alike
	b.duplicate("f", "a", uniqueBy(hex.EncodeToString(sum[:]), 0))
}

// TestUniqueKeyPerLane: lanes hold their keys apart (another lane key, another queue).
func TestUniqueKeyPerLane(t *testing.T) {
	b := setup(t)
	b.created("a", uniqueBy("u", 0))
	b.created("b", uniqueBy("u", 0), func(e *orreryv1.Enqueue) { e.Lane = laneOf(testQueue, "other") })
	b.created("c", uniqueBy("u", 0), func(e *orreryv1.Enqueue) { e.Lane = laneOf("mail", "k") })
	b.duplicate("d", "a", uniqueBy("u", 0))
}

// TestUniqueIDRulesComeFirst: an enqueue under an id its lane holds is answered by the id rules
// (created false without duplicate_of, or IdempotencyConflict), whatever its unique key; a
// duplicate enqueue replayed is a duplicate again.
func TestUniqueIDRulesComeFirst(t *testing.T) {
	b := setup(t)
	b.created("a", uniqueBy("u", 0))
	before := b.store.Clone()
	res, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "a", PayloadJson: `{"id":"a"}`, Unique: &orreryv1.UniqueSpec{Key: "u"}}, b.now, CompareOrReturn)
	if err != nil || res.GetCreated() || res.GetDuplicateOf() != "" || !b.store.Equal(before) {
		t.Fatalf("the same enqueue again: %v %v", res, err)
	}
	_, err = ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "a", PayloadJson: `{"other":1}`, Unique: &orreryv1.UniqueSpec{Key: "v"}}, b.now, CompareOrReturn)
	wantCode(t, err, orrery.CodeIdempotencyConflict, "id")
	b.duplicate("b", "a", uniqueBy("u", 0))
	b.duplicate("b", "a", uniqueBy("u", 0))
}

// TestUniqueRefusals: a bad UniqueSpec is Validation naming its field, and a duplicate into a
// full lane is still a duplicate; a refused enqueue writes nothing.
func TestUniqueRefusals(t *testing.T) {
	b := setup(t)
	for _, c := range []struct {
		spec  *orreryv1.UniqueSpec
		field string
	}{
		{&orreryv1.UniqueSpec{}, "unique.key"},
		{&orreryv1.UniqueSpec{Key: "u", ByPayload: true}, "unique"},
		{&orreryv1.UniqueSpec{Key: "bad\x01key"}, "unique.key"},
		{&orreryv1.UniqueSpec{Key: string(bytes.Repeat([]byte("k"), input.MaxIDBytes+1))}, "unique.key"},
		{&orreryv1.UniqueSpec{Key: "u", PeriodMicros: -1}, "unique.period_micros"},
		{&orreryv1.UniqueSpec{ByPayload: true, PeriodMicros: input.MaxUniquePeriodMicros + 1}, "unique.period_micros"},
	} {
		before := b.store.Clone()
		_, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "a", Unique: c.spec}, b.now, CompareOrReturn)
		wantCode(t, err, orrery.CodeValidation, c.field)
		if !b.store.Equal(before) {
			t.Fatalf("refused %v wrote", c.spec)
		}
	}
	b.created("a", uniqueBy("u", input.MaxUniquePeriodMicros))
	b.lim.MaxLaneMessages = 1
	b.duplicate("b", "a", uniqueBy("u", 0))
	before := b.store.Clone()
	_, err := ApplyEnqueue(b.store, b.lim, &orreryv1.Enqueue{Lane: laneOf(testQueue, "k"), Id: "b", Unique: &orreryv1.UniqueSpec{Key: "v"}}, b.now, CompareOrReturn)
	wantCode(t, err, orrery.CodeQuotaExceeded, "lane")
	if !b.store.Equal(before) {
		t.Fatal("an enqueue into a full lane wrote")
	}
}

// checkUniqueInvariants: every record held while live names a message live in its lane under
// that key, every record held for a period has its lapse entry, and every lapse entry points at
// a record held until its instant.
func checkUniqueInvariants(store *kv.Memory) error {
	lapsePrefix := keys.UniqueLapsePrefix()
	records, entries := 0, 0
	err := kv.ScanPrefix(store, keys.Unique, func(key, value []byte) (bool, error) {
		if bytes.HasPrefix(key, lapsePrefix) {
			entries++
			recordKey, err := keys.UniqueFromLapse(key)
			if err != nil {
				return false, err
			}
			raw, found, err := store.Get(recordKey)
			if err != nil || !found {
				return false, fmt.Errorf("lapse entry %x points at no record (%v)", key, err)
			}
			rec := &orreryv1.UniqueRecord{}
			if err := proto.Unmarshal(raw, rec); err != nil {
				return false, err
			}
			if !bytes.Equal(keys.AppendUint64(bytes.Clone(lapsePrefix), uint64(rec.GetHeldUntilUnixMicros())), key[:len(lapsePrefix)+8]) {
				return false, fmt.Errorf("lapse entry %x for a record held until %d", key, rec.GetHeldUntilUnixMicros())
			}
			return true, nil
		}
		records++
		rec := &orreryv1.UniqueRecord{}
		if err := proto.Unmarshal(value, rec); err != nil {
			return false, err
		}
		lane, uniqueKey, err := keys.SplitLaneID(key[len(keys.Unique):])
		if err != nil {
			return false, err
		}
		if until := rec.GetHeldUntilUnixMicros(); until != 0 {
			if _, found, err := store.Get(keys.UniqueLapseKey(until, lane, uniqueKey)); err != nil || !found {
				return false, fmt.Errorf("record of %q held until %d has no lapse entry (%v)", uniqueKey, until, err)
			}
			return true, nil
		}
		msg, found, err := loadMessage(store, lane, rec.GetMessageId())
		if err != nil {
			return false, err
		}
		if !found || msg.GetUniqueKey() != uniqueKey {
			return false, fmt.Errorf("record of %q held while live names %q, which is not live under it (%v)", uniqueKey, rec.GetMessageId(), msg)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	held := 0
	err = kv.ScanPrefix(store, keys.Unique, func(key, value []byte) (bool, error) {
		if !bytes.HasPrefix(key, lapsePrefix) {
			rec := &orreryv1.UniqueRecord{}
			if err := proto.Unmarshal(value, rec); err != nil {
				return false, err
			}
			if rec.GetHeldUntilUnixMicros() != 0 {
				held++
			}
		}
		return true, nil
	})
	if err == nil && held != entries {
		err = fmt.Errorf("%d records held for a period, %d lapse entries (of %d records)", held, entries, records)
	}
	return err
}
