package input

import (
	"maps"
	"slices"
	"strings"

	"github.com/orreryhq/orrery"
)

// Bounds of a label set (a schedule definition's or a saga's labels, a list's selector).
const (
	MaxLabels          = 16
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 200
)

// Labels checks a label set: at most MaxLabels, keys of 1..MaxLabelKeyBytes letters, digits,
// '.', '_', '-' and '/', values of 0..MaxLabelValueBytes valid UTF-8 without control
// characters. The error is a Validation error on field (field.key for a value).
func Labels(field string, labels map[string]string) error {
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
			if err := Name(field+"."+k, v, MaxLabelValueBytes); err != nil {
				return err
			}
		}
	}
	return nil
}
