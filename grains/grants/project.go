package grants

import (
	"sort"

	"google.golang.org/protobuf/proto"

	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/grains/kv"
)

// CreatorPath is the redacted path that says a record's creator was withheld.
const CreatorPath = "creator"

// UniqueKeyPath is the redacted path that says a message's unique key was withheld: a message
// whose payload or headers lose a path loses its unique key too, since a key by payload is a
// hash of them (one that confirms a guess of what was withheld).
const UniqueKeyPath = "unique_key"

// timeoutPrefix prefixes the redacted paths of a saga's timeout template.
const timeoutPrefix = "timeout."

// ReadsCreator reports whether principal may see the creator of a record in namespace and
// queue: the creator itself, or a principal holding PolicyAdmin there (who decides the
// grants of every principal there anyway). To anyone else a reply shows no creator.
func ReadsCreator(grant *orreryv1.GrantRecord, principal, creator, namespace, queue string) bool {
	return principal == creator || Holds(grant, PolicyAdmin, namespace, queue)
}

// ProjectMessage returns msg as a caller with grant may read it under capability
// (QueueConsume for a receive, QueueInspect for a lane page): its payload and headers through
// Redact, the removed paths merged into redacted_paths. Everything else (id, lane, lease,
// delivery count, origin) is kept, so a receive without read permission still acks by its
// token, except the unique key of a message that loses a path (UniqueKeyPath). msg itself is
// never changed: a projection that removes something is a copy.
func ProjectMessage(grant *orreryv1.GrantRecord, capability Capability, msg *orreryv1.QueueMessage) *orreryv1.QueueMessage {
	namespace, queue := msg.GetLane().GetNamespace(), msg.GetLane().GetQueue()
	payload, payloadPaths := Redact(grant, capability, namespace, queue, Document{Root: PayloadRoot, JSON: msg.GetPayloadJson()})
	headers, headerPaths := Redact(grant, capability, namespace, queue, Document{Root: HeadersRoot, JSON: msg.GetHeadersJson()})
	if payload == msg.GetPayloadJson() && headers == msg.GetHeadersJson() && len(payloadPaths)+len(headerPaths) == 0 {
		return msg
	}
	out := proto.Clone(msg).(*orreryv1.QueueMessage)
	out.PayloadJson, out.HeadersJson = payload, headers
	removed := mergePaths(payloadPaths, headerPaths)
	if out.GetUniqueKey() != "" && len(removed) > 0 {
		out.UniqueKey, removed = "", mergePaths(removed, []string{UniqueKeyPath})
	}
	out.RedactedPaths = mergePaths(out.GetRedactedPaths(), removed)
	return out
}

// projectTemplate projects t in place (a template of a record's copy) under capability in
// namespace and queue and returns the removed paths, prefixed; visible false removes its
// payload and headers whole.
func projectTemplate(grant *orreryv1.GrantRecord, capability Capability, namespace, queue, prefix string, visible bool, t *orreryv1.MessageTemplate) (paths []string) {
	if t == nil {
		return nil
	}
	for _, doc := range []struct {
		root string
		json *string
	}{{PayloadRoot, &t.PayloadJson}, {HeadersRoot, &t.HeadersJson}} {
		var removed []string
		if visible {
			*doc.json, removed = Redact(grant, capability, namespace, queue, Document{Root: doc.root, JSON: *doc.json})
		} else if *doc.json != "" {
			*doc.json, removed = "", []string{doc.root}
		}
		for _, p := range removed {
			paths = append(paths, prefix+p)
		}
	}
	return paths
}

// ProjectSchedule returns rec as a caller (principal, with grant) may inspect it: its
// template's payload and headers through Redact under QueueInspect in the schedule's lane,
// and its creator only where ReadsCreator allows, the withheld paths in redacted_paths
// (template paths under "payload" and "headers", and CreatorPath). rec itself is not
// changed.
func ProjectSchedule(grant *orreryv1.GrantRecord, principal string, rec *orreryv1.ScheduleRecord) *orreryv1.ScheduleRecord {
	if rec == nil {
		return nil
	}
	out := proto.Clone(rec).(*orreryv1.ScheduleRecord)
	lane := rec.GetDefinition().GetLane()
	paths := projectTemplate(grant, QueueInspect, lane.GetNamespace(), lane.GetQueue(), "", true, out.GetDefinition().GetTemplate())
	if rec.GetCreator() != "" && !ReadsCreator(grant, principal, rec.GetCreator(), lane.GetNamespace(), lane.GetQueue()) {
		out.Creator = ""
		paths = append(paths, CreatorPath)
	}
	out.RedactedPaths = mergePaths(out.GetRedactedPaths(), sorted(paths))
	return out
}

// ProjectSaga returns rec as a caller (principal, with grant) may inspect it: its state
// through Redact under QueueInspect in the saga's lane; its timeout's template through Redact
// under QueueInspect on the timeout's queue, or removed whole when the caller holds no
// QueueInspect there (the template is what that queue will receive); its creator only where
// ReadsCreator allows. The withheld paths are in redacted_paths ("state...",
// "timeout.payload...", "timeout.headers...", CreatorPath). rec itself is not changed.
func ProjectSaga(grant *orreryv1.GrantRecord, principal string, rec *orreryv1.SagaRecord) *orreryv1.SagaRecord {
	if rec == nil {
		return nil
	}
	out := proto.Clone(rec).(*orreryv1.SagaRecord)
	namespace, queue := rec.GetLane().GetNamespace(), rec.GetLane().GetQueue()
	var paths []string
	out.StateJson, paths = Redact(grant, QueueInspect, namespace, queue, Document{Root: StateRoot, JSON: rec.GetStateJson()})
	if t := out.GetTimeout(); t != nil {
		visible := Holds(grant, QueueInspect, namespace, t.GetQueue())
		paths = append(paths, projectTemplate(grant, QueueInspect, namespace, t.GetQueue(), timeoutPrefix, visible, t.GetTemplate())...)
	}
	if rec.GetCreator() != "" && !ReadsCreator(grant, principal, rec.GetCreator(), namespace, queue) {
		out.Creator = ""
		paths = append(paths, CreatorPath)
	}
	out.RedactedPaths = mergePaths(out.GetRedactedPaths(), sorted(paths))
	return out
}

// ProjectInspect projects every record and message of reply through the current grant of
// principal read from r (ProjectSchedule, ProjectSaga, ProjectMessage under QueueInspect):
// the one place an inspection reply passes before it leaves the partition. Ledger records,
// queue counts and partition status carry no document or identity and pass unchanged.
func ProjectInspect(r kv.Reader, principal string, reply *orreryv1.InspectReply) error {
	grant, err := Load(r, principal)
	if err != nil {
		return err
	}
	reply.Schedule = ProjectSchedule(grant, principal, reply.GetSchedule())
	if reply.GetInspection().GetRecord() != nil {
		reply.Inspection.Record = ProjectSchedule(grant, principal, reply.GetInspection().GetRecord())
		for _, g := range reply.GetInspection().GetGenerations() {
			g.Record = ProjectSchedule(grant, principal, g.GetRecord())
		}
	}
	reply.Saga = ProjectSaga(grant, principal, reply.GetSaga())
	for i, msg := range reply.GetMessages() {
		reply.Messages[i] = ProjectMessage(grant, QueueInspect, msg)
	}
	for _, listed := range reply.GetListedSchedules() {
		listed.Record = ProjectSchedule(grant, principal, listed.GetRecord())
	}
	for i, rec := range reply.GetListedSagas() {
		reply.ListedSagas[i] = ProjectSaga(grant, principal, rec)
	}
	return nil
}

// sorted sorts paths in place and returns them.
func sorted(paths []string) []string {
	sort.Strings(paths)
	return paths
}
