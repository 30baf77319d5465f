package grants

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
)

// Access is what a field policy allows on its path.
type Access int

// The accesses of a FieldPolicy.
const (
	// Write: a principal sets the path in what it enqueues, configures or exchanges.
	Write Access = iota + 1
	// Use: emission and timeouts carry the path's value on the principal's behalf.
	Use
	// Read: inspection and receive show the path's value to the principal (Redact).
	Read
)

func (a Access) String() string {
	switch a {
	case Use:
		return "use"
	case Read:
		return "read"
	}
	return "write"
}

// The documents field policy paths start in.
const (
	PayloadRoot = "payload"
	HeadersRoot = "headers"
	StateRoot   = "state"
)

// Document is a JSON document a mutation sets or an emission carries, under its root
// (PayloadRoot, HeadersRoot or StateRoot).
type Document struct {
	Root string
	JSON string
}

// CheckFields checks access to every field of docs for the rules of grant that hold
// capability for namespace and queue. Field policies refine a capability: a field no policy of
// those rules names is allowed; a field a policy names (its path, or a path it lies under: the
// longest such path decides, and at one path any policy allowing wins) is allowed when that
// policy allows access; setting a field also touches the protected paths under it, so a
// policy under a leaf that forbids access forbids the leaf. The error, Unauthorized, names the
// subject, the access, the document's root, the namespace and the queue, never a value of the
// document. A document that is empty, or that is not valid JSON (its mutation reports that), is
// not checked.
func CheckFields(grant *orreryv1.GrantRecord, subject string, capability Capability, namespace, queue string, access Access, docs ...Document) error {
	for _, doc := range docs {
		policies := fieldPolicies(grant, capability, namespace, queue, doc.Root, access)
		if len(policies) == 0 || doc.JSON == "" {
			continue
		}
		var value any
		if err := json.Unmarshal([]byte(doc.JSON), &value); err != nil {
			continue
		}
		var leaves []string
		collectLeaves(doc.Root, value, &leaves)
		sort.Strings(leaves)
		for _, leaf := range leaves {
			if !allowed(policies, leaf) {
				where := "namespace " + quote(namespace)
				if queue != "" {
					where += " queue " + quote(queue)
				}
				return orrery.Errorf(orrery.CodeUnauthorized, "%s lacks %s on a protected field of %s in %s", subject, access, doc.Root, where)
			}
		}
	}
	return nil
}

// fieldPolicies are the paths under root that the rules of grant holding capability for
// namespace and queue name, each with whether one of them allows access.
func fieldPolicies(grant *orreryv1.GrantRecord, capability Capability, namespace, queue, root string, access Access) map[string]bool {
	var policies map[string]bool
	for _, rule := range grant.GetRules() {
		if Capability(rule.GetCapabilities())&capability != capability || !covers(rule, namespace, queue) {
			continue
		}
		for _, f := range rule.GetFields() {
			if f.GetPath() != root && !strings.HasPrefix(f.GetPath(), root+".") {
				continue
			}
			if policies == nil {
				policies = map[string]bool{}
			}
			ok := f.GetWrite()
			switch access {
			case Use:
				ok = f.GetUse()
			case Read:
				ok = f.GetRead()
			}
			policies[f.GetPath()] = policies[f.GetPath()] || ok
		}
	}
	return policies
}

// allowed decides one leaf path against policies (see CheckFields).
func allowed(policies map[string]bool, leaf string) bool {
	decided, decision := "", true
	for path, ok := range policies {
		switch {
		case path == leaf || strings.HasPrefix(leaf, path+"."):
			if len(path) > len(decided) {
				decided, decision = path, ok
			}
		case strings.HasPrefix(path, leaf+"."):
			if !ok {
				return false // the leaf overwrites a protected path under it
			}
		}
	}
	return decision
}

// collectLeaves appends the paths of value's leaves under path: an object's members are
// followed, anything else (an empty object, an array, a scalar) is a leaf.
func collectLeaves(path string, value any, leaves *[]string) {
	object, ok := value.(map[string]any)
	if !ok || len(object) == 0 {
		*leaves = append(*leaves, path)
		return
	}
	for key, member := range object {
		collectLeaves(path+"."+key, member, leaves)
	}
}
