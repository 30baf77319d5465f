package main

import (
	"strings"
	"testing"

	"github.com/orreryhq/orrery/internal/testkit"
)

// TestEveryJobIsHandledByItsQueuesHandler runs the example against an embedded silo (a
// protoactor cluster: no -race, see the Makefile): each job is handled once, by its queue's
// typed handler, and the failed thumbnail again at its second delivery.
func TestEveryJobIsHandledByItsQueuesHandler(t *testing.T) {
	var out testkit.Buffer
	if err := run(&out, ""); err != nil {
		t.Fatalf("jobs: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		`email "welcome" to ada@example.com`, `email "welcome" to grace@example.com`,
		"thumbnail of cat.png at 128 px (delivery 1)", "thumbnail of dog.png at 128 px (delivery 1)",
		"thumbnail of owl.png failed at delivery 1, retried", "thumbnail of owl.png at 128 px (delivery 2)",
		"all jobs handled",
	} {
		if strings.Count(text, want) != 1 {
			t.Errorf("printed %q %d times, want once:\n%s", want, strings.Count(text, want), text)
		}
	}
}
