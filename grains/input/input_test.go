package input

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
)

// TestUUIDv5KnownVector: the RFC 9562 Appendix A.4 example, UUIDv5 of "www.example.com" in the
// DNS name space (python3: uuid.uuid5(uuid.NAMESPACE_DNS, "www.example.com")).
func TestUUIDv5KnownVector(t *testing.T) {
	if got := uuidV5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "www.example.com"); got != "2ed6657d-e927-568b-95e1-2665a8aea6a2" {
		t.Fatalf("uuidV5 = %s", got)
	}
}

// TestScheduleIDFromName: the expected ids were computed independently with python3:
// uuid.uuid5(uuid.UUID("cd679389-9d51-4c81-9430-cceb92e6449a"), "acme\x00nightly-report") and
// the same with "globex\x00nightly-report". The id is canonical, stable, and differs between
// namespaces for one name.
func TestScheduleIDFromName(t *testing.T) {
	acme := ScheduleIDFromName("acme", "nightly-report")
	if acme != "97c60732-8f36-5fa6-b36e-e22fe44d24f5" {
		t.Fatalf("acme id %s", acme)
	}
	globex := ScheduleIDFromName("globex", "nightly-report")
	if globex != "e3be8472-d53c-515c-a4df-9c35c3180edc" {
		t.Fatalf("globex id %s", globex)
	}
	if err := UUID("schedule_id", acme); err != nil {
		t.Fatalf("derived id is not a canonical UUID: %v", err)
	}
	// The separator keeps ("ab", "c") and ("a", "bc") apart.
	if ScheduleIDFromName("ab", "c") == ScheduleIDFromName("a", "bc") {
		t.Fatal("namespace and name run together")
	}
}

// TestScheduleIDFromNameIncarnation: a name's first incarnation is ScheduleIDFromName's id (the
// id of every schedule named before names were reusable); the later ones were computed with
// python3: uuid.uuid5(uuid.UUID("cd679389-9d51-4c81-9430-cceb92e6449a"),
// "acme\x00nightly-report\x002") and the same with "\x003". Each is canonical and distinct.
func TestScheduleIDFromNameIncarnation(t *testing.T) {
	first := ScheduleIDFromName("acme", "nightly-report")
	if got := ScheduleIDFromNameIncarnation("acme", "nightly-report", 1); got != first {
		t.Fatalf("incarnation 1 is %s, want the name's id %s", got, first)
	}
	if got := ScheduleIDFromNameIncarnation("acme", "nightly-report", 0); got != first {
		t.Fatalf("incarnation 0 is %s, want the first's %s", got, first)
	}
	want := map[uint64]string{2: "7c3f62dd-44a4-5f7b-bc25-d4c42a6bf29b", 3: "659c50a0-a274-5ef1-8180-137ca85f5849"}
	for n, id := range want {
		if got := ScheduleIDFromNameIncarnation("acme", "nightly-report", n); got != id {
			t.Fatalf("incarnation %d is %s, want %s", n, got, id)
		}
		if err := UUID("schedule_id", id); err != nil || id == first {
			t.Fatalf("incarnation %d: %v, equal to the first: %v", n, err, id == first)
		}
	}
}

// TestSagaIDFromName: a saga id derived from a name is a fixed canonical UUID, per namespace,
// and never a schedule's of the same name.
func TestSagaIDFromName(t *testing.T) {
	id := SagaIDFromName("acme", "order-42")
	if id != "58f68e76-62ed-5dd9-b14d-dca9e93a5096" {
		t.Fatalf("acme saga id %s", id)
	}
	if err := UUID("saga_id", id); err != nil {
		t.Fatalf("derived id is not a canonical UUID: %v", err)
	}
	if id == SagaIDFromName("globex", "order-42") || id == ScheduleIDFromName("acme", "order-42") {
		t.Fatal("a saga id is shared with another namespace's or with a schedule's")
	}
}

// TestEmptyJSONMeansNone: an empty payload or headers document is accepted (none); a
// non-empty one that is not valid JSON (or, for headers, not an object) is a Validation error
// naming the field and saying what is accepted.
func TestEmptyJSONMeansNone(t *testing.T) {
	if err := JSONValue("payload_json", "", 10); err != nil {
		t.Fatalf("empty payload: %v", err)
	}
	if err := JSONObject("headers_json", "", 10); err != nil {
		t.Fatalf("empty headers: %v", err)
	}
	cases := []struct {
		check func() error
		field string
		want  string
	}{
		{func() error { return JSONValue("payload_json", "hello", 100) }, "payload_json", "must be empty or valid JSON"},
		{func() error { return JSONObject("headers_json", "hello", 100) }, "headers_json", "must be empty or a valid JSON object"},
		{func() error { return JSONObject("headers_json", "[1]", 100) }, "headers_json", "must be empty or a valid JSON object"},
	}
	for _, c := range cases {
		err := c.check()
		if !errors.Is(err, orrery.ErrValidation) || orrery.AsError(err).Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("error %v, want Validation on %s saying %q", err, c.field, c.want)
		}
	}
}

func TestRefuseSystemNamesThePrincipalAndTheCaller(t *testing.T) {
	if err := RefuseSystem("alice", "a client"); err != nil {
		t.Fatalf("alice refused: %v", err)
	}
	err := RefuseSystem(CoordinatorPrincipal, "a client")
	if !errors.Is(err, orrery.ErrUnauthorized) || !strings.Contains(err.Error(), `principal: "system:coordinator"`) || !strings.Contains(err.Error(), "which a client may not act as") {
		t.Fatalf("got %v, want Unauthorized naming the principal and the caller", err)
	}
}

// TestBoundsErrorsSpeakTimesAndDurations: an instant or a duration out of its bounds is
// written as a time or a duration, not as microseconds, and Go's zero time.Time is named.
func TestBoundsErrorsSpeakTimesAndDurations(t *testing.T) {
	err := Duration("definition.spec.every.interval_micros", -5_000_000, Second, 365*24*3600*Second)
	if err == nil || !strings.Contains(err.Error(), "must be between 1s and 8760h0m0s, got -5s") {
		t.Errorf("duration error %v", err)
	}
	err = Instant("definition.spec.at.due_at_unix_micros", time.Time{}.UnixMicro())
	if err == nil || !strings.Contains(err.Error(), "got 0001-01-01T00:00:00Z (the zero time.Time: unset?)") {
		t.Errorf("zero instant error %v", err)
	}
	err = Instant("deadline_unix_micros", MaxInstantMicros+1)
	if err == nil || !strings.Contains(err.Error(), "got 10000-01-01T00:00:00Z") {
		t.Errorf("late instant error %v", err)
	}
	if got := FormatDuration(1 << 62); got != "4611686018427387904 µs" {
		t.Errorf("a duration beyond time.Duration: %s", got)
	}
}
