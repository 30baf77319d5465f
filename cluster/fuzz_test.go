package cluster

import (
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzGossipDecoders: what a node gossips arrives from the network as bytes; decoding arbitrary
// node metadata or user messages never panics, node metadata the decoder accepts is complete
// and encodes again within memberlist's limit to metadata that decodes to the same member,
// and an accepted notice names a member.
func FuzzGossipDecoders(f *testing.F) {
	meta, err := encodeMeta(nodeMeta{Cluster: "orrery", ID: "m1", Host: "127.0.0.1", Port: 7381, Kinds: []string{PartitionKind}, Silo: 0x2a, ClusterID: 0xbeef, Expect: 3})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(meta)
	f.Add(encodeNotice(blockedNotice{Cluster: "orrery", ID: "m2", From: "m1"}))
	f.Add([]byte(`{"c":"orrery","i":"m3","h":"h","p":1,"x":true,"s":"zz"}`))
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
	})
}
