package grants

import (
	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/grains/keys"
	"github.com/orreryhq/orrery/grains/kv"
	"github.com/orreryhq/orrery/grains/record"
)

// AnyNamespace is the namespace of a rule that covers every namespace.
const AnyNamespace = "*"

// Load returns the grant of principal (nil when it has none).
func Load(r kv.Reader, principal string) (*orreryv1.GrantRecord, error) {
	rec := &orreryv1.GrantRecord{}
	found, err := record.Load(r, keys.GrantKey(principal), rec)
	if err != nil || !found {
		return nil, err
	}
	return rec, nil
}

// Holds reports whether grant (nil: none) holds capability for namespace and queue (empty:
// the whole namespace, which only a rule without a queue covers).
func Holds(grant *orreryv1.GrantRecord, capability Capability, namespace, queue string) bool {
	for _, rule := range grant.GetRules() {
		if Capability(rule.GetCapabilities())&capability == capability && covers(rule, namespace, queue) {
			return true
		}
	}
	return false
}

// covers reports whether rule applies to namespace and queue.
func covers(rule *orreryv1.GrantRule, namespace, queue string) bool {
	if rule.GetNamespace() != AnyNamespace && rule.GetNamespace() != namespace {
		return false
	}
	scoped := rule.GetQueue()
	return scoped == "" || scoped == queue || scoped+input.DeadLetterSuffix == queue
}

// Require reads principal's grant and fails Unauthorized unless it holds capability for
// namespace and queue. subject is who the error says lacks it (Caller, or a phrase such as
// "the creator of the schedule" that names no principal): the error names the subject, the
// capability, the namespace and the queue, and nothing of any record.
func Require(r kv.Reader, subject, principal string, capability Capability, namespace, queue string) error {
	grant, err := Load(r, principal)
	if err != nil {
		return err
	}
	return RequireOf(grant, subject, capability, namespace, queue)
}

// RequireOf is Require on a grant already read.
func RequireOf(grant *orreryv1.GrantRecord, subject string, capability Capability, namespace, queue string) error {
	if Holds(grant, capability, namespace, queue) {
		return nil
	}
	return Denied(subject, capability, namespace, queue)
}

// Caller is the subject of a caller's denials: `caller "<principal>"`.
func Caller(principal string) string { return "caller " + quote(principal) }

// Denied is the Unauthorized error of a missing capability.
func Denied(subject string, capability Capability, namespace, queue string) *orrery.Error {
	where := "namespace " + quote(namespace)
	if queue != "" {
		where += " queue " + quote(queue)
	}
	return orrery.Errorf(orrery.CodeUnauthorized, "%s lacks %s on %s", subject, capability, where)
}

// RequireSystem fails Unauthorized unless principal is one of Orrery's own.
func RequireSystem(principal, what string) error {
	if input.IsSystem(principal) {
		return nil
	}
	return orrery.Errorf(orrery.CodeUnauthorized, "%s is for Orrery's own principals (%s...), not for %s", what, input.SystemPrincipalPrefix, quote(principal))
}

// AuthorizeInspect checks that the principal of req holds QueueInspect where req reads: the
// lane of a schedule, saga, ledger or lane page, the namespace (and queue, or lane's queue,
// when given) of a list, of the due schedules or of a queue's counts, every namespace for the list of a partition's queues. The audit
// log needs PolicyAdmin on "*" instead. Partition status needs no grant, nor do a queue's counts
// and the list of a partition's queues for Orrery's own principals (a silo's share rebalancer
// reads them: counts and shares, no message); an inspection without a rule here is refused.
func AuthorizeInspect(r kv.Reader, req *orreryv1.InspectRequest) error {
	var namespace, queue string
	switch t := req.GetTarget().(type) {
	case *orreryv1.InspectRequest_Schedule:
		namespace, queue = t.Schedule.GetLane().GetNamespace(), t.Schedule.GetLane().GetQueue()
	case *orreryv1.InspectRequest_Saga:
		namespace, queue = t.Saga.GetLane().GetNamespace(), t.Saga.GetLane().GetQueue()
	case *orreryv1.InspectRequest_Ledger:
		namespace, queue = t.Ledger.GetLane().GetNamespace(), t.Ledger.GetLane().GetQueue()
	case *orreryv1.InspectRequest_Lane:
		namespace, queue = t.Lane.GetLane().GetNamespace(), t.Lane.GetLane().GetQueue()
	case *orreryv1.InspectRequest_ListSchedules:
		namespace, queue = t.ListSchedules.GetNamespace(), t.ListSchedules.GetQueue()
	case *orreryv1.InspectRequest_ListSagas:
		namespace, queue = t.ListSagas.GetNamespace(), t.ListSagas.GetQueue()
	case *orreryv1.InspectRequest_Queue:
		if input.IsSystem(req.GetPrincipal()) {
			return nil // a silo's share rebalancer reads a capped queue's shares and demand
		}
		namespace, queue = t.Queue.GetNamespace(), t.Queue.GetQueue()
	case *orreryv1.InspectRequest_ListDue:
		namespace, queue = t.ListDue.GetNamespace(), t.ListDue.GetQueue()
		if queue == "" {
			queue = t.ListDue.GetLane().GetQueue()
		}
	case *orreryv1.InspectRequest_Calendar:
		namespace = t.Calendar.GetNamespace() // a calendar is the whole namespace's
	case *orreryv1.InspectRequest_ListCalendars:
		namespace = t.ListCalendars.GetNamespace()
	case *orreryv1.InspectRequest_ListQueues:
		if input.IsSystem(req.GetPrincipal()) {
			return nil // a silo's share rebalancer finds the capped queues
		}
		// Every queue of the partition, whatever its namespace.
		namespace = AnyNamespace
	case *orreryv1.InspectRequest_Partition:
		return nil
	case *orreryv1.InspectRequest_Audit:
		return Require(r, Caller(req.GetPrincipal()), req.GetPrincipal(), PolicyAdmin, AnyNamespace, "")
	default:
		return orrery.Errorf(orrery.CodeUnauthorized, "inspection %T has no authorization rule", t)
	}
	return Require(r, Caller(req.GetPrincipal()), req.GetPrincipal(), QueueInspect, namespace, queue)
}

func quote(s string) string { return `"` + s + `"` }
