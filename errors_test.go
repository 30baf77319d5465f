package orrery

import (
	"context"
	"errors"
	"fmt"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// allCodes lists every code the wire enum defines, read from the generated descriptor, so a
// code added to the .proto without a mapping fails TestEveryCodeIsMapped.
func allCodes() []Code {
	values := orreryv1.ErrorCode(0).Descriptor().Values()
	var codes []Code
	for i := range values.Len() {
		if n := values.Get(i).Number(); n != 0 {
			codes = append(codes, Code(n))
		}
	}
	return codes
}

func TestEveryCodeIsMapped(t *testing.T) {
	sentinels := map[Code]*Error{
		CodeValidation: ErrValidation, CodeNotFound: ErrNotFound, CodeRevisionConflict: ErrRevisionConflict,
		CodeTokenInvalidated: ErrTokenInvalidated, CodeIdempotencyConflict: ErrIdempotencyConflict,
		CodeUnauthorized: ErrUnauthorized, CodeQuotaExceeded: ErrQuotaExceeded, CodeExpired: ErrExpired,
		CodeSuspended: ErrSuspended, CodeUnavailable: ErrUnavailable, CodeInternal: ErrInternal,
		CodeDeadlineExceeded: ErrDeadlineExceeded,
	}
	for _, code := range allCodes() {
		if codeName(code) == fmt.Sprintf("code %d", int32(code)) {
			t.Errorf("code %v has no name", code)
		}
		if sentinels[code] == nil {
			t.Errorf("code %v has no sentinel", code)
		}
		status := HTTPStatus(code)
		if status < 400 || status > 599 {
			t.Errorf("code %v maps to HTTP %d", code, status)
		}
		if code == CodeInternal || code == CodeUnavailable || code == CodeDeadlineExceeded {
			if status < 500 {
				t.Errorf("platform code %v maps to client status %d", code, status)
			}
		} else if status == 500 {
			t.Errorf("business code %v fell through to 500", code)
		}
	}
	if HTTPStatus(Code(999)) != 500 || Retriable(Code(999)) {
		t.Error("an unknown code must be a non-retriable 500")
	}
}

func TestOnlyUnavailableAndDeadlineAreRetriable(t *testing.T) {
	for _, code := range allCodes() {
		want := code == CodeUnavailable || code == CodeDeadlineExceeded
		if Retriable(code) != want {
			t.Errorf("Retriable(%v) = %v, want %v", code, Retriable(code), want)
		}
	}
}

func TestErrorsIsMatchesByCodeAcrossTheWire(t *testing.T) {
	err := Invalid("definition.spec.every.interval_micros", "must be between %d and %d", 1, 2)
	if !errors.Is(err, ErrValidation) || errors.Is(err, ErrNotFound) {
		t.Fatal("errors.Is must match the sentinel of the code only")
	}
	wrapped := fmt.Errorf("configure: %w", err)
	if !errors.Is(wrapped, ErrValidation) {
		t.Fatal("errors.Is must see through %w")
	}
	back := FromProto(err.Proto())
	if !errors.Is(back, ErrValidation) || AsError(back).Field != "definition.spec.every.interval_micros" {
		t.Fatalf("round trip lost code or field: %v", back)
	}
	if got := err.Error(); got != "validation: definition.spec.every.interval_micros: must be between 1 and 2" {
		t.Fatalf("message %q", got)
	}
	if FromProto(nil) != nil || CodeOf(nil) != 0 {
		t.Fatal("nil must stay nil")
	}
}

// TestLeaderSiloCrossesTheWireAndIsFoundThroughWrappers: a not-leader answer's LeaderSilo
// survives Proto/FromProto, and LeaderSiloOf finds it under a wrapper without one, through %w
// and through errors.Join.
func TestLeaderSiloCrossesTheWireAndIsFoundThroughWrappers(t *testing.T) {
	notLeader := Errorf(CodeUnavailable, "partition 3: this replica does not lead")
	notLeader.LeaderSilo = 42
	back := FromProto(notLeader.Proto())
	if AsError(back).LeaderSilo != 42 || !errors.Is(back, ErrUnavailable) {
		t.Fatalf("round trip lost the leader: %+v", back)
	}
	gaveUp := Wrap(CodeUnavailable, back, "call partition/3: gave up after 1 attempt")
	expired := Wrap(CodeDeadlineExceeded, errors.Join(context.DeadlineExceeded, fmt.Errorf("attempt: %w", back)), "deadline")
	for _, err := range []error{back, gaveUp, fmt.Errorf("call: %w", gaveUp), expired} {
		if got := LeaderSiloOf(err); got != 42 {
			t.Errorf("LeaderSiloOf(%v) = %d, want 42", err, got)
		}
	}
	if got := LeaderSiloOf(Wrap(CodeUnavailable, errors.New("no leader"), "x")); got != 0 {
		t.Errorf("LeaderSiloOf without a leader = %d", got)
	}
	if LeaderSiloOf(nil) != 0 {
		t.Error("LeaderSiloOf(nil) != 0")
	}
}

func TestForeignErrorsClassify(t *testing.T) {
	cause := errors.New("fsync failed")
	e := AsError(cause)
	if e.Code != CodeInternal || !errors.Is(e, cause) {
		t.Fatalf("foreign error: %v", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	if CodeOf(ctx.Err()) != CodeDeadlineExceeded {
		t.Fatalf("deadline: %v", CodeOf(ctx.Err()))
	}
	p := Wrap(CodeUnavailable, cause, "partition 3").Proto()
	if p.GetMessage() != "partition 3: fsync failed" {
		t.Fatalf("wire message %q", p.GetMessage())
	}
}

func TestInFieldPrefixes(t *testing.T) {
	if f := Invalid("lane.key", "x").InField("mutations[2].enqueue").Field; f != "mutations[2].enqueue.lane.key" {
		t.Fatal(f)
	}
	if f := Invalid("", "x").InField("mutations[0]").Field; f != "mutations[0]" {
		t.Fatal(f)
	}
}

// TestASentinelWithAFieldMatchesThatFieldOnly: a sentinel that names a field matches an error
// of its code whose field is that field, alone or as the last element of a path (a batch
// prefixes its mutation's), after a trip across the wire; a sentinel without one matches by
// code alone, as before.
func TestASentinelWithAFieldMatchesThatFieldOnly(t *testing.T) {
	paused := &Error{Code: CodeSuspended, Field: "paused"}
	cases := []struct {
		err  *Error
		want bool
	}{
		{FieldErrorf(CodeSuspended, "paused", "it is paused"), true},
		{FieldErrorf(CodeSuspended, "paused", "it is paused").InField("mutations[0].trigger_schedule"), true},
		{FieldErrorf(CodeSuspended, "cancelled", "it is cancelled"), false},
		{FieldErrorf(CodeSuspended, "not_paused", "x"), false},
		{FieldErrorf(CodeSuspended, "", "x"), false},
		{FieldErrorf(CodeValidation, "paused", "x"), false},
	}
	for _, c := range cases {
		wire := FromProto(c.err.Proto())
		if got := errors.Is(wire, paused); got != c.want {
			t.Errorf("errors.Is(%v, paused sentinel) = %v, want %v", wire, got, c.want)
		}
		if !errors.Is(wire, &Error{Code: c.err.Code}) {
			t.Errorf("%v does not match its code's sentinel", wire)
		}
	}
}
