package grants

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Redact projects doc through the read policies of the rules of grant that hold capability
// for namespace and queue (QueueInspect for inspection, QueueConsume for receive), returning
// the projected JSON and the sorted paths it removed. Each value is decided like a field of
// CheckFields with read as the access: the longest policy path it lies under decides (at one
// path any policy allowing wins), a value no policy names is shown, and a leaf (a scalar, an
// array, an empty object) with a forbidding policy under it is removed whole. An object whose
// deciding policy forbids it and under which no policy allows anything is removed as one
// path, so the names of its members are not listed either.
//
// A document no read policy of those rules names, and an empty document, are returned
// byte-identical with no path. Otherwise the projection is re-encoded (object members in
// sorted key order, numbers as written, no HTML escaping) even when nothing is removed, so
// that what is shown is exactly what was decided; an object whose members were all removed
// is removed too (a root left without members is withheld whole). A root removed whole, or a
// document that is not valid JSON, is returned empty with the root listed. Projecting a
// projection through the same policies returns it unchanged with no path, so a replayed
// receipt re-projected under unchanged policies is byte-identical to the first answer.
func Redact(grant *orreryv1.GrantRecord, capability Capability, namespace, queue string, doc Document) (projected string, redacted []string) {
	policies := fieldPolicies(grant, capability, namespace, queue, doc.Root, Read)
	if len(policies) == 0 || doc.JSON == "" {
		return doc.JSON, nil
	}
	removeRoot := []string{doc.Root}
	if !json.Valid([]byte(doc.JSON)) {
		return "", removeRoot
	}
	decoder := json.NewDecoder(strings.NewReader(doc.JSON))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return "", removeRoot
	}
	kept, shown := project(policies, doc.Root, value, &redacted)
	if !shown {
		return "", removeRoot
	}
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(kept); err != nil {
		return "", removeRoot
	}
	sort.Strings(redacted)
	return strings.TrimSuffix(out.String(), "\n"), redacted
}

// project returns what of value at path policies show, and false when value is removed whole
// (its path is then appended to redacted).
func project(policies map[string]bool, path string, value any, redacted *[]string) (any, bool) {
	object, isObject := value.(map[string]any)
	if !isObject || len(object) == 0 {
		if allowed(policies, path) {
			return value, true
		}
		*redacted = append(*redacted, path)
		return nil, false
	}
	decision, allowsUnder, forbidsUnder := decide(policies, path)
	switch {
	case !decision && !allowsUnder:
		*redacted = append(*redacted, path)
		return nil, false
	case decision && !forbidsUnder:
		return value, true
	}
	kept := make(map[string]any, len(object))
	for key, member := range object {
		if v, ok := project(policies, path+"."+key, member, redacted); ok {
			kept[key] = v
		}
	}
	// An object left without members goes too (its members are listed): an empty object in
	// a projection is one the document had, so projecting a projection removes nothing more.
	return kept, len(kept) > 0
}

// decide returns the decision of the longest policy path that path lies under (true when
// none), and whether some policy strictly under path allows, or forbids.
func decide(policies map[string]bool, path string) (decision, allowsUnder, forbidsUnder bool) {
	decided := ""
	decision = true
	for p, ok := range policies {
		switch {
		case p == path || strings.HasPrefix(path, p+"."):
			if len(p) > len(decided) {
				decided, decision = p, ok
			}
		case strings.HasPrefix(p, path+"."):
			allowsUnder = allowsUnder || ok
			forbidsUnder = forbidsUnder || !ok
		}
	}
	return decision, allowsUnder, forbidsUnder
}

// mergePaths is the sorted union of two sorted path lists without duplicates.
func mergePaths(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	merged := append(append([]string(nil), a...), b...)
	sort.Strings(merged)
	out := merged[:1]
	for _, p := range merged[1:] {
		if p != out[len(out)-1] {
			out = append(out, p)
		}
	}
	return out
}
