package cluster

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzGossipDecoders: what a node gossips arrives from the network as bytes; decoding arbitrary
// node metadata or user messages never panics, node metadata the decoder accepts is complete
// and encodes again within memberlist's limit to metadata that decodes to the same member,
// an accepted notice names a member, and an accepted retired set names a cluster id and no
// zero silo id and encodes again to itself.
func FuzzGossipDecoders(f *testing.F) {
	meta, err := encodeMeta(nodeMeta{Cluster: "orrery", ID: "m1", Host: "127.0.0.1", Port: 7381, Kinds: []string{PartitionKind}, Silo: 0x2a, ClusterID: 0xbeef, Expect: 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(meta)
	f.Add(encodeNotice(blockedNotice{Cluster: "orrery", ID: "m2", From: "m1"}))
	f.Add([]byte(`{"c":"orrery","i":"m3","h":"h","p":1,"x":true,"s":"zz"}`))
	f.Add(encodeRetired(retiredState{Cluster: "orrery", ClusterID: 0xbeef, Silos: []hexID{0x2a, 0x2b}}))
	f.Fuzz(func(t *testing.T, buf []byte) {
		if m, err := decodeMeta(buf); err == nil {
			if m.Cluster == "" || m.ID == "" || m.Host == "" || m.Port <= 0 {
				t.Fatalf("accepted incomplete metadata %+v", m)
			}
			again, err := encodeMeta(m)
			if err != nil {
				if len(buf) <= memberlist.MetaMaxSize {
					t.Fatalf("accepted metadata of %d bytes does not encode again: %v", len(buf), err)
				}
				return
			}
			back, err := decodeMeta(again)
			if err != nil || back.peer() != m.peer() || back.Host != m.Host || back.Port != m.Port {
				t.Fatalf("metadata %+v encodes to %q, which decodes to %+v (%v)", m, again, back, err)
			}
		}
		if n, ok := decodeNotice(buf); ok && (n.ID == "" || n.Type != noticeBlocked) {
			t.Fatalf("accepted notice %+v", n)
		}
		if r, ok := decodeRetired(buf); ok {
			if r.ClusterID == 0 || slices.Contains(r.Silos, 0) {
				t.Fatalf("accepted retired set %+v", r)
			}
			if back, ok := decodeRetired(encodeRetired(r)); !ok || !reflect.DeepEqual(back, r) {
				t.Fatalf("retired set %+v encodes to one that decodes to %+v (%v)", r, back, ok)
			}
		}
	})
}
