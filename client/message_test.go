package client

import (
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestMessageShowsItsRedactedPaths: a message received without read on its payload and
// headers has them empty, keeps its lease token and names what was withheld.
func TestMessageShowsItsRedactedPaths(t *testing.T) {
	m := &Message{msg: &orreryv1.QueueMessage{Id: "m1", Lease: &orreryv1.Lease{Token: "tok"}, RedactedPaths: []string{"headers", "payload"}}}
	if len(m.Payload()) != 0 || m.LeaseToken() != "tok" || len(m.RedactedPaths()) != 2 || m.RedactedPaths()[1] != "payload" {
		t.Fatalf("message %v %q %q", m.Payload(), m.LeaseToken(), m.RedactedPaths())
	}
}

// TestMessageShowsItsUniqueKey: a message names the unique key it took in its lane.
func TestMessageShowsItsUniqueKey(t *testing.T) {
	m := &Message{msg: &orreryv1.QueueMessage{Id: "m1", UniqueKey: "report-7"}}
	if m.UniqueKey() != "report-7" || (&Message{msg: &orreryv1.QueueMessage{Id: "m2"}}).UniqueKey() != "" {
		t.Fatalf("unique key %q", m.UniqueKey())
	}
}
