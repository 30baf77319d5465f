package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

// TestPeerChangesAreLoggedOnceEach: logPeers logs one line per peer silo that joined (INFO),
// left gracefully (INFO) or failed (WARN), nothing for a publish that changed nothing, and
// nothing for this member itself.
func TestPeerChangesAreLoggedOnceEach(t *testing.T) {
	var buf bytes.Buffer
	p := &Provider{env: &environment{selfID: "self"}, logger: slog.New(slog.NewTextHandler(&buf, nil))}
	first := map[string]uint64{"self": 1, "a": 2, "b": 3, "c": 4}
	p.logPeers(nil, first)
	p.logPeers(first, first)
	p.dropNode("b", memberlist.StateLeft)
	p.dropNode("c", memberlist.StateDead)
	p.logPeers(first, map[string]uint64{"self": 1, "a": 2, "d": 5})
	want := []string{
		`level=INFO msg="peer silo joined" peer=a peer_silo_id=` + FormatID(2),
		`level=INFO msg="peer silo joined" peer=b peer_silo_id=` + FormatID(3),
		`level=INFO msg="peer silo joined" peer=c peer_silo_id=` + FormatID(4),
		`level=INFO msg="peer silo joined" peer=d peer_silo_id=` + FormatID(5),
		`level=INFO msg="peer silo left" peer=b peer_silo_id=` + FormatID(3),
		`level=WARN msg="peer silo unreachable: it stopped answering, its partitions fail over to their other replicas" peer=c peer_silo_id=` + FormatID(4),
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q, want %q", i, lines[i], w)
		}
	}
	if len(p.departed) != 0 {
		t.Errorf("departures kept after they were logged: %v", p.departed)
	}
}

// TestMemberlistConnectionChurnIsDebug: memberlist's lines about a connection to a gone peer,
// or one closed by this node's shutdown, log at DEBUG; its other warnings keep their level.
func TestMemberlistConnectionChurnIsDebug(t *testing.T) {
	var buf bytes.Buffer
	logger := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	logger.Print("[ERR] memberlist: Push/Pull with x failed: dial tcp 127.0.0.1:17402: connect: connection refused")
	logger.Print("[ERR] memberlist: Failed to send gossip to 127.0.0.1:17392: write udp 127.0.0.1:17402->127.0.0.1:17392: use of closed network connection")
	logger.Print("[WARN] memberlist: Was able to connect to x over TCP but UDP probes failed, network may be misconfigured")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[1], "level=DEBUG") || !strings.Contains(lines[2], "level=WARN") {
		t.Fatalf("logged:\n%s", buf.String())
	}
}
