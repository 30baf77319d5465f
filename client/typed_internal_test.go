package client

import (
	"context"
	"errors"
	"testing"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

func TestAJSONHandlerRefusesAPayloadOfAnotherShape(t *testing.T) {
	type welcome struct {
		User string `json:"user"`
	}
	called := false
	h := JSONHandler(func(context.Context, *Job[welcome]) error { called = true; return nil })
	if err := h(context.Background(), &Message{msg: &orreryv1.QueueMessage{Id: "m1", PayloadJson: `{"user":42}`}}); !errors.Is(err, orrery.ErrValidation) || called {
		t.Fatalf("a payload of another shape: %v (handler called: %v), want Validation and no call", err, called)
	}
	if err := h(context.Background(), &Message{msg: &orreryv1.QueueMessage{Id: "m2"}}); err != nil || !called {
		t.Fatalf("a message without a payload: %v (handler called: %v), want the zero value handled", err, called)
	}
}
