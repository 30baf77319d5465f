package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	in := nodeMeta{Cluster: "orrery", ID: "abc", Host: "127.0.0.1", Port: 4000, Kinds: []string{"partition", "prototopic"},
		Silo: 0xfedcba9876543210, ClusterID: 0x0123456789abcdef}
	buf, err := encodeMeta(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeMeta(buf)
	if err != nil {
		t.Fatal(err)
	}
	if out.Cluster != in.Cluster || out.ID != in.ID || out.Host != in.Host || out.Port != in.Port || !slices.Equal(out.Kinds, in.Kinds) || out.Client ||
		out.Silo != in.Silo || out.ClusterID != in.ClusterID || out.Expect != 0 {
		t.Fatalf("round trip: %+v -> %s -> %+v", in, buf, out)
	}
	for _, want := range []string{`"s":"fedcba9876543210"`, `"ci":"0123456789abcdef"`} {
		if !strings.Contains(string(buf), want) {
			t.Errorf("metadata %s lacks %s", buf, want)
		}
	}
	founder, err := encodeMeta(nodeMeta{Cluster: "orrery", ID: "f", Host: "127.0.0.1", Port: 4002, Silo: 7, Expect: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := decodeMeta(founder); got.ClusterID != 0 || got.Expect != 3 || got.Silo != 7 || strings.Contains(string(founder), `"ci"`) {
		t.Fatalf("founder metadata %s decoded as %+v", founder, got)
	}
	if _, err := decodeMeta([]byte(`{"c":"x","i":"y","h":"z","p":1,"ci":"not hex"}`)); err == nil {
		t.Error("a cluster id that is not hex was accepted")
	}
	m := out.member()
	if m.Address() != "127.0.0.1:4000" || m.Id != "abc" {
		t.Fatalf("member %v", m)
	}

	client, err := encodeMeta(nodeMeta{Cluster: "orrery", ID: "c", Host: "127.0.0.1", Port: 4001, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := decodeMeta(client); !got.Client || len(got.Kinds) != 0 {
		t.Fatalf("client meta %s decoded as %+v", client, got)
	}
	for _, bad := range []string{"", "{}", "not json", `{"c":"x","i":"y","h":"z","p":0}`} {
		if _, err := decodeMeta([]byte(bad)); err == nil {
			t.Errorf("decodeMeta(%q) accepted", bad)
		}
	}
}

func TestMetaTooLarge(t *testing.T) {
	t.Parallel()
	var kinds []string
	for i := range 40 {
		kinds = append(kinds, fmt.Sprintf("a-rather-long-kind-name-%02d", i))
	}
	_, err := encodeMeta(nodeMeta{Cluster: "orrery", ID: "abc", Host: "127.0.0.1", Port: 4000, Kinds: kinds})
	if err == nil || !strings.Contains(err.Error(), "512") {
		t.Fatalf("oversized metadata: err = %v", err)
	}

	// Kinds that fit without a cluster id but not with one fail at start, not later when the
	// member takes its cluster id.
	base := nodeMeta{Cluster: "fits", ID: "node-x", Host: "127.0.0.1", Port: 20000, Silo: 1}
	kinds = nil
	for {
		kinds = append(kinds, fmt.Sprintf("kind-%03d", len(kinds)))
		base.Kinds = kinds
		buf, _ := json.Marshal(base)
		if len(buf) > memberlist.MetaMaxSize-20 {
			break
		}
	}
	if _, err := encodeMeta(base); err != nil {
		t.Fatalf("the metadata without a cluster id should fit: %v", err)
	}
	p, err := NewProvider(ProviderConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(false) })
	err = p.start(&environment{clusterName: base.Cluster, selfID: base.ID, host: base.Host, port: base.Port, kinds: kinds})
	if err == nil || !strings.Contains(err.Error(), "512") {
		t.Fatalf("start with metadata that cannot take a cluster id: err = %v", err)
	}
}

func TestNoticeRoundTrip(t *testing.T) {
	t.Parallel()
	n, ok := decodeNotice(encodeNotice(blockedNotice{Cluster: "c", ID: "victim", From: "judge"}))
	if !ok || n.Cluster != "c" || n.ID != "victim" || n.From != "judge" {
		t.Fatalf("notice %+v ok=%v", n, ok)
	}
	for _, bad := range []string{"", "{}", `{"t":"other","i":"x"}`, `{"t":"blocked"}`} {
		if _, ok := decodeNotice([]byte(bad)); ok {
			t.Errorf("decodeNotice(%q) accepted", bad)
		}
	}
}

func TestParseMemberlistLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Marking x as failed", slog.LevelInfo, "Marking x as failed"},
		{"[WARN] memberlist: Refuting a suspect message (from: y)", slog.LevelWarn, "Refuting a suspect message (from: y)"},
		{"[ERR] memberlist: Failed to send", slog.LevelError, "Failed to send"},
		{"no tag at all", slog.LevelInfo, "no tag at all"},
	} {
		level, msg := parseMemberlistLine(tc.line)
		if level != tc.level || msg != tc.msg {
			t.Errorf("parse(%q) = %v %q, want %v %q", tc.line, level, msg, tc.level, tc.msg)
		}
	}
}

func TestProviderConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := ProviderConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BindHost != DefaultBindHost || cfg.ProbeInterval != DefaultProbeInterval || cfg.SuspicionMult != DefaultSuspicionMult || cfg.ResyncInterval != DefaultResyncInterval {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, bad := range []ProviderConfig{
		{BindPort: -1},
		{BindPort: 70000},
		{ProbeInterval: 100e6, ProbeTimeout: 200e6},
		{SecretKey: make([]byte, 17)},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
}
