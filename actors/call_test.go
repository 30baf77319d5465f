package actors

import (
	"context"
	"errors"
	"testing"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/orreryhq/orrery"
)

// Call over a real cluster (reaching grains, giving up, deadlines, failover) is tested in
// package cluster, which starts members; these are the parts that need none.

func TestClassifyReply(t *testing.T) {
	t.Parallel()
	errBusy := errors.New("busy")
	retryBusy := func(m proto.Message) error {
		if m.(*wrapperspb.StringValue).GetValue() == "busy" {
			return errBusy
		}
		return nil
	}
	for _, tc := range []struct {
		name      string
		raw       any
		wantReply bool
		retry     error
		fatal     error
	}{
		{name: "reply", raw: wrapperspb.String("ok"), wantReply: true},
		{name: "nil", raw: nil, retry: errNilReply},
		{name: "unavailable grain error", raw: protocluster.NewGrainErrorResponse(protocluster.ErrorReason_UNAVAILABLE, "x"), retry: &protocluster.GrainErrorResponse{Reason: protocluster.ErrorReason_UNAVAILABLE}},
		{name: "other grain error", raw: protocluster.NewGrainErrorResponse(protocluster.ErrorReason_NOT_FOUND, "x"), fatal: orrery.ErrInternal},
		{name: "not proto", raw: 42, fatal: orrery.ErrInternal},
		{name: "retried by RetryReply", raw: wrapperspb.String("busy"), retry: errBusy},
	} {
		reply, retry, fatal := classifyReply("k", "id", tc.raw, retryBusy)
		if (reply != nil) != tc.wantReply {
			t.Errorf("%s: reply %v", tc.name, reply)
		}
		if !errors.Is(retry, tc.retry) || (tc.retry == nil) != (retry == nil) {
			t.Errorf("%s: retry error %v, want %v", tc.name, retry, tc.retry)
		}
		if !errors.Is(fatal, tc.fatal) || (tc.fatal == nil) != (fatal == nil) {
			t.Errorf("%s: fatal error %v, want %v", tc.name, fatal, tc.fatal)
		}
	}
}

func TestCallRejectsNilMessage(t *testing.T) {
	t.Parallel()
	_, err := Call(context.Background(), nil, "id", "kind", nil, CallOptions{})
	if !errors.Is(err, orrery.ErrInternal) {
		t.Fatalf("err = %v", err)
	}
}

func TestExpiredErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	err := expired(ctx, "k", "id", 2, errAttemptTimeout)
	if !errors.Is(err, orrery.ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errAttemptTimeout) {
		t.Fatalf("deadline: %v", err)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	err = expired(cctx, "k", "id", 0, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, orrery.ErrDeadlineExceeded) {
		t.Fatalf("cancel: %v", err)
	}
}
