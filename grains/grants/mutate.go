package grants

import (
	"fmt"
	"strings"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// Bounds of one grant.
const (
	MaxRules          = 64
	MaxFieldsPerRule  = 64
	MaxFieldPathBytes = 256
)

// fieldRoots are the documents a field policy's path may start in.
var fieldRoots = []string{"payload", "headers", "state"}

// ApplyPut applies PutGrant on behalf of caller: it replaces the grant of m.Principal with
// m.Rules (no rules: the principal holds nothing, as after DeleteGrant). The caller must be
// one of Orrery's own principals or hold PolicyAdmin on every namespace and queue that a rule
// of the old or the new grant names. Every check runs before the write.
func ApplyPut(v kv.View, caller string, m *orreryv1.PutGrant) error {
	if err := Validate(m); err != nil {
		return err
	}
	old, err := Load(v, m.GetPrincipal())
	if err != nil {
		return err
	}
	if err := requireAdmin(v, caller, old.GetRules(), m.GetRules()); err != nil {
		return err
	}
	if len(m.GetRules()) == 0 {
		return v.Delete(keys.GrantKey(m.GetPrincipal()))
	}
	_, err = record.Store(v, keys.GrantKey(m.GetPrincipal()), &orreryv1.GrantRecord{Principal: m.GetPrincipal(), Rules: m.GetRules()})
	return err
}

// ApplyDelete applies DeleteGrant on behalf of caller, under the authority ApplyPut needs for
// the old grant. Deleting an absent grant succeeds (for a caller with PolicyAdmin on "*").
func ApplyDelete(v kv.View, caller string, m *orreryv1.DeleteGrant) error {
	if err := input.Name("principal", m.GetPrincipal(), input.MaxIDBytes); err != nil {
		return err
	}
	old, err := Load(v, m.GetPrincipal())
	if err != nil {
		return err
	}
	if err := requireAdmin(v, caller, old.GetRules()); err != nil {
		return err
	}
	return v.Delete(keys.GrantKey(m.GetPrincipal()))
}

// requireAdmin checks that caller may change a grant whose old and new rules are given: a
// system principal may; any other needs PolicyAdmin covering each rule's namespace and queue,
// or on "*" when there is no rule at all.
func requireAdmin(r kv.Reader, caller string, ruleSets ...[]*orreryv1.GrantRule) error {
	if input.IsSystem(caller) {
		return nil
	}
	grant, err := Load(r, caller)
	if err != nil {
		return err
	}
	none := true
	for _, rules := range ruleSets {
		for _, rule := range rules {
			none = false
			if err := RequireOf(grant, Caller(caller), PolicyAdmin, rule.GetNamespace(), rule.GetQueue()); err != nil {
				return err
			}
		}
	}
	if none {
		return RequireOf(grant, Caller(caller), PolicyAdmin, AnyNamespace, "")
	}
	return nil
}

// Validate checks a PutGrant: its principal, at most MaxRules rules, each naming "*" or a
// namespace, optionally a queue, only defined capabilities, and at most MaxFieldsPerRule
// field policies on paths under payload, headers or state.
func Validate(m *orreryv1.PutGrant) error {
	if err := input.Name("principal", m.GetPrincipal(), input.MaxIDBytes); err != nil {
		return err
	}
	if len(m.GetRules()) > MaxRules {
		return orrery.Invalid("rules", "has %d rules, more than the limit of %d", len(m.GetRules()), MaxRules)
	}
	for i, rule := range m.GetRules() {
		if err := validateRule(rule); err != nil {
			return orrery.AsError(err).InField(fmt.Sprintf("rules[%d]", i))
		}
	}
	return nil
}

func validateRule(rule *orreryv1.GrantRule) error {
	if rule.GetNamespace() != AnyNamespace {
		if err := input.Name("namespace", rule.GetNamespace(), input.MaxNamespaceBytes); err != nil {
			return err
		}
	}
	if rule.GetQueue() != "" {
		if err := input.QueueName("queue", rule.GetQueue(), false); err != nil {
			return err
		}
	}
	if caps := Capability(rule.GetCapabilities()); caps&^All != 0 {
		return orrery.Invalid("capabilities", "has undefined bits %#x (defined: %#x, %s)", uint64(caps&^All), uint64(All), All)
	}
	if len(rule.GetFields()) > MaxFieldsPerRule {
		return orrery.Invalid("fields", "has %d field policies, more than the limit of %d", len(rule.GetFields()), MaxFieldsPerRule)
	}
	for i, f := range rule.GetFields() {
		if err := validatePath(f.GetPath()); err != nil {
			return orrery.AsError(err).InField(fmt.Sprintf("fields[%d]", i))
		}
	}
	return nil
}

// validatePath checks a field policy's path: a root of fieldRoots, then ".name" segments, each
// non-empty.
func validatePath(path string) error {
	if err := input.Name("path", path, MaxFieldPathBytes); err != nil {
		return err
	}
	segments := strings.Split(path, ".")
	root := false
	for _, r := range fieldRoots {
		root = root || segments[0] == r
	}
	if !root {
		return orrery.Invalid("path", "must start with payload, headers or state, got %q", path)
	}
	for _, s := range segments[1:] {
		if s == "" {
			return orrery.Invalid("path", "has an empty segment: %q", path)
		}
	}
	return nil
}

// Everything is the PutGrant that gives principal every capability defined (All) on every
// namespace: what a development silo grants its default client principal.
func Everything(principal string) *orreryv1.PutGrant {
	return &orreryv1.PutGrant{Principal: principal, Rules: []*orreryv1.GrantRule{{Namespace: AnyNamespace, Capabilities: uint64(All)}}}
}
