package cluster

import "github.com/hashicorp/memberlist"

// memberlistNode is memberlist's view of one node.
type memberlistNode = memberlist.Node

// delegate is the provider's memberlist.Delegate: it announces the node metadata and receives
// fence notices. memberlist calls it from its own goroutines, some while holding its locks, so
// nothing here blocks or calls back into memberlist.
type delegate struct{ p *Provider }

// NodeMeta returns the JSON metadata (checked against the limit in start).
func (d delegate) NodeMeta(limit int) []byte {
	if len(d.p.meta) > limit {
		return nil
	}
	return d.p.meta
}

// NotifyMsg receives user messages: fence notices.
func (d delegate) NotifyMsg(buf []byte) { d.p.onNotice(buf) }

// GetBroadcasts has nothing to piggyback.
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no state for push/pull.
func (d delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores remote push/pull state.
func (d delegate) MergeRemoteState(buf []byte, join bool) {}

// events is the provider's memberlist.EventDelegate. memberlist invokes it while holding its
// node lock, so it only signals the run goroutine, which then reads Members() itself.
type events struct{ p *Provider }

// NotifyJoin signals a republish.
func (e events) NotifyJoin(*memberlist.Node) { e.p.signal() }

// NotifyLeave signals a republish.
func (e events) NotifyLeave(*memberlist.Node) { e.p.signal() }

// NotifyUpdate signals a republish.
func (e events) NotifyUpdate(*memberlist.Node) { e.p.signal() }
