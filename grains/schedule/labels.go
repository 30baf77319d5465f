package schedule

import (
	"maps"
	"slices"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
)

// Bounds of a definition's labels.
const (
	MaxLabels          = 16
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 200
)

// HasLabels reports whether def carries labels: a behaviour of apply version 10.
func HasLabels(def *orreryv1.ScheduleDefinition) bool { return len(def.GetLabels()) > 0 }

// ValidateLabels checks a label set (of a definition, field "labels", or of a list's
// selector): at most MaxLabels, keys of 1..MaxLabelKeyBytes letters, digits, '.', '_', '-' and
// '/', values of 0..MaxLabelValueBytes valid UTF-8 without control characters.
func ValidateLabels(field string, labels map[string]string) *orrery.Error {
	if len(labels) > MaxLabels {
		return orrery.Invalid(field, "has %d labels, at most %d", len(labels), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == "" || len(k) > MaxLabelKeyBytes || strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '/')
		}) >= 0 {
			return orrery.Invalid(field, "key %q: want 1..%d bytes of letters, digits, '.', '_', '-' and '/'", k, MaxLabelKeyBytes)
		}
		if v := labels[k]; v != "" {
			if err := input.Name(field+"."+k, v, MaxLabelValueBytes); err != nil {
				return orrery.AsError(err)
			}
		}
	}
	return nil
}

// MatchesLabels reports whether labels carry every key of selector with its value (an empty
// value in selector: the key with any value).
func MatchesLabels(labels, selector map[string]string) bool {
	for k, want := range selector {
		got, ok := labels[k]
		if !ok || (want != "" && got != want) {
			return false
		}
	}
	return true
}
