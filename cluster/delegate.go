package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// memberlistNode is memberlist's view of one node.
type memberlistNode = memberlist.Node

// delegate is the provider's memberlist.Delegate: it announces the node metadata, receives
// fence notices, and exchanges the retired silos (retired.go). memberlist calls it from its own goroutines, some while holding its locks, so
// nothing here blocks or calls back into memberlist.
type delegate struct{ p *Provider }

// NodeMeta returns the JSON metadata (checked against the limit in start).
func (d delegate) NodeMeta(limit int) []byte {
	meta := d.p.meta.Load()
	if meta == nil || len(*meta) > limit {
		return nil
	}
	return *meta
}

// NotifyMsg receives user messages: fence notices and retired silos.
func (d delegate) NotifyMsg(buf []byte) {
	if s, ok := decodeRetired(buf); ok {
		d.p.mergeRetired(s)
		return
	}
	d.p.onNotice(buf)
}

// GetBroadcasts has nothing to piggyback.
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is the push/pull state: the retired silos.
func (d delegate) LocalState(join bool) []byte { return d.p.retiredBuf() }

// MergeRemoteState takes a peer's retired silos.
func (d delegate) MergeRemoteState(buf []byte, join bool) {
	if s, ok := decodeRetired(buf); ok {
		d.p.mergeRetired(s)
	}
}

// events is the provider's memberlist.EventDelegate. memberlist invokes it while holding its
// node lock, with the node's state as of the event: it copies the node into the provider's own
// view (Provider.nodes) and signals the run goroutine. memberlist's Members() hands out
// pointers to nodes it later rewrites (a metadata update), so the provider never reads them.
type events struct{ p *Provider }

// NotifyJoin records the node and signals a republish.
func (e events) NotifyJoin(n *memberlist.Node) { e.p.setNode(*n) }

// NotifyLeave forgets the node, remembering whether it left or failed (a failed silo of this
// cluster for the join loop too, failedPeers), and signals a republish.
func (e events) NotifyLeave(n *memberlist.Node) {
	e.p.noteFailed(*n)
	e.p.dropNode(n.Name, n.State)
}

// NotifyUpdate records the node's new metadata and signals a republish.
func (e events) NotifyUpdate(n *memberlist.Node) { e.p.setNode(*n) }

// setNode records a live node (a copy, taken under memberlist's lock).
func (p *Provider) setNode(n memberlist.Node) {
	p.failed.seen(n.Address())
	p.nodesMu.Lock()
	delete(p.departing, n.Name)
	p.nodes[n.Name] = n
	p.nodesMu.Unlock()
	p.signal()
}

// noteFailed records n in p.failed when it is a silo of this node's cluster. memberlist calls
// NotifyLeave with the node's State field never updated (its own nodeState.State shadows it), so
// a silo that left is recorded as well as one declared dead: contacting the address of a silo
// that stopped costs one refused connection per push/pull interval.
func (p *Provider) noteFailed(n memberlist.Node) {
	meta, err := decodeMeta(n.Meta)
	own := p.clusterID.Load()
	if err != nil || meta.Cluster != p.env.clusterName || meta.Client || own == 0 || uint64(meta.ClusterID) != own {
		return
	}
	p.failed.failed(n.Address(), uint64(meta.Silo), time.Now())
}

// dropNode forgets a node that is dead or left, and remembers which until the next publish logs
// it (logPeers). A node that did not announce that it drains stays in the view for deadGrace
// (Provider.view), and is back in it for good if memberlist lists it again meanwhile, or out of
// it at once when another node is live at its address (it was restarted). The state
// memberlist's leave event carries is always StateAlive (see noteFailed), so a known node counts
// as left when it announced that it drains (a graceful stop does), as dead otherwise.
func (p *Provider) dropNode(name string, state memberlist.NodeStateType) {
	p.nodesMu.Lock()
	if node, ok := p.nodes[name]; ok {
		if meta, err := decodeMeta(node.Meta); err == nil {
			state = memberlist.StateDead
			if meta.Draining {
				state = memberlist.StateLeft
			} else {
				if p.departing == nil {
					p.departing = map[string]departingNode{}
				}
				p.departing[name] = departingNode{node: node, at: time.Now()}
			}
		}
	}
	delete(p.nodes, name)
	if p.departed == nil {
		p.departed = map[string]memberlist.NodeStateType{}
	}
	p.departed[name] = state
	p.nodesMu.Unlock()
	p.signal()
}
