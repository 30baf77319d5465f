package main

import (
	"strings"
	"testing"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// TestExportRefusesARedactedTemplate: a listed schedule whose template was redacted for the
// caller is not exported (its definition is not the schedule's); a withheld creator is.
func TestExportRefusesARedactedTemplate(t *testing.T) {
	def := &orreryv1.ScheduleDefinition{ScheduleId: "0f8fad5b-d9cb-469f-a165-70867728950e"}
	if err := exportable(&orreryv1.ScheduleRecord{Definition: def, RedactedPaths: []string{"creator"}}); err != nil {
		t.Errorf("a withheld creator: %v", err)
	}
	err := exportable(&orreryv1.ScheduleRecord{Definition: def, RedactedPaths: []string{"creator", "payload.card"}})
	if err == nil || !strings.Contains(err.Error(), "payload.card") || strings.Contains(err.Error(), "creator,") {
		t.Errorf("a redacted template: %v", err)
	}
}
