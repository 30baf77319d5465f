package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	orreryv1 "github.com/orreryhq/orrery/api/v1"
	"github.com/orreryhq/orrery/chaos"
	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/cluster/transportauth"
	"github.com/orreryhq/orrery/grains/input"
	"github.com/orreryhq/orrery/partition"
	"github.com/orreryhq/orrery/silo"
)

func TestFlagsOverrideEnvironment(t *testing.T) {
	env := map[string]string{"ORRERY_DATA": "/env/data", "ORRERY_PORT": "9000", "ORRERY_SEEDS": "a:1, b:2", "ORRERY_GOSSIP_PORT": "9001", "ORRERY_OPEN_TIMEOUT": "7s",
		"ORRERY_METRICS_SCHEDULES": "x, y"}
	opts, err := parseConfig([]string{"--port", "9100"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.silo
	if cfg.DataDir != "/env/data" || cfg.Port != 9100 || cfg.GossipPort != 9001 || strings.Join(cfg.Seeds, ",") != "a:1,b:2" || cfg.OpenTimeout != 7*time.Second ||
		strings.Join(cfg.MetricsSchedules, ",") != "x,y" {
		t.Fatalf("config %+v", cfg)
	}
}

// TestBootstrapExpectFlag: --bootstrap-expect defaults to 0, comes from the command line or
// ORRERY_BOOTSTRAP_EXPECT, and a negative value names the flag.
func TestBootstrapExpectFlag(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.silo.BootstrapExpect != 0 {
		t.Fatalf("default bootstrap-expect %d (%v)", opts.silo.BootstrapExpect, err)
	}
	env := func(k string) string {
		if k == "ORRERY_BOOTSTRAP_EXPECT" {
			return "3"
		}
		return ""
	}
	if opts, err := parseConfig(nil, env); err != nil || opts.silo.BootstrapExpect != 3 {
		t.Fatalf("ORRERY_BOOTSTRAP_EXPECT=3: %d (%v)", opts.silo.BootstrapExpect, err)
	}
	if opts, err := parseConfig([]string{"--bootstrap-expect", "5"}, env); err != nil || opts.silo.BootstrapExpect != 5 {
		t.Fatalf("--bootstrap-expect 5 over the environment: %d (%v)", opts.silo.BootstrapExpect, err)
	}
	if _, err := parseConfig([]string{"--bootstrap-expect", "-1"}, none); err == nil || !strings.Contains(err.Error(), "bootstrap-expect") {
		t.Fatalf("--bootstrap-expect -1: error %v should name the flag", err)
	}
}

// TestMaxClockOffsetFlag: --max-clock-offset defaults to silo.DefaultMaxClockOffset, 0
// disables the check (a negative Config.MaxClockOffset), and a negative value names the flag.
func TestMaxClockOffsetFlag(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, silo.DefaultMaxClockOffset},
		{[]string{"--max-clock-offset", "2s"}, 2 * time.Second},
		{[]string{"--max-clock-offset", "0"}, -1},
	} {
		if opts, err := parseConfig(tc.args, none); err != nil || opts.silo.MaxClockOffset != tc.want {
			t.Fatalf("%v: max clock offset %v (%v), want %v", tc.args, opts.silo.MaxClockOffset, err, tc.want)
		}
	}
	if _, err := parseConfig([]string{"--max-clock-offset", "-1s"}, none); err == nil || !strings.Contains(err.Error(), "max-clock-offset") {
		t.Fatalf("--max-clock-offset -1s: error %v should name the flag", err)
	}
}

func TestLateAfterFlag(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.silo.LateAfter != silo.DefaultLateAfter {
		t.Fatalf("default late-after %v (%v)", opts.silo.LateAfter, err)
	}
	if opts, err := parseConfig([]string{"--late-after", "2m"}, none); err != nil || opts.silo.LateAfter != 2*time.Minute {
		t.Fatalf("--late-after 2m: %v (%v)", opts.silo.LateAfter, err)
	}
}

func TestBadInputNamesTheSetting(t *testing.T) {
	_, err := parseConfig(nil, func(k string) string {
		if k == "ORRERY_PARTITIONS" {
			return "many"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "ORRERY_PARTITIONS") {
		t.Fatalf("error %v should name ORRERY_PARTITIONS", err)
	}
	if _, err := parseConfig([]string{"--log-level", "loud"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("error %v should name log-level", err)
	}
	for _, bad := range [][]string{{"--failure-profile", "wan"}, {"--replicas", "0"}, {"--replicas", "8"}, {"--dead-after", "0s"}, {"--late-after", "0s"}} {
		name := strings.TrimPrefix(bad[0], "--")
		if _, err := parseConfig(bad, func(string) string { return "" }); err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), " ", "-"), name) {
			t.Fatalf("%v: error %v should name %s", bad, err, name)
		}
	}
}

// TestMaxProcsIsGosUnlessSet: by default the binary leaves GOMAXPROCS to Go (0); an explicit
// value is taken; a negative one is refused, naming the flag.
func TestMaxProcsIsGosUnlessSet(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.maxProcs != 0 {
		t.Errorf("default --max-procs %d (%v), want 0", opts.maxProcs, err)
	}
	if opts, err := parseConfig([]string{"--max-procs", "7"}, none); err != nil || opts.maxProcs != 7 {
		t.Errorf("--max-procs 7: %d (%v)", opts.maxProcs, err)
	}
	if _, err := parseConfig([]string{"--max-procs", "-1"}, none); err == nil || !strings.Contains(err.Error(), "max-procs: must be at least 0") {
		t.Errorf("--max-procs -1: %v, want an error naming the flag", err)
	}
}

// TestGCPercentIsFiftyUnlessGOGCSaysOtherwise: by default the binary sets Go's GC target to
// DefaultGCPercent; GOGC in the environment wins over that default, not over an explicit
// --gc-percent or ORRERY_GC_PERCENT; 0 leaves Go's; a negative value is refused, naming the flag.
func TestGCPercentIsFiftyUnlessGOGCSaysOtherwise(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"default", nil, nil, DefaultGCPercent},
		{"GOGC", nil, map[string]string{"GOGC": "200"}, 0},
		{"flag over GOGC", []string{"--gc-percent", "80"}, map[string]string{"GOGC": "200"}, 80},
		{"environment over GOGC", nil, map[string]string{"GOGC": "200", "ORRERY_GC_PERCENT": "70"}, 70},
		{"zero", []string{"--gc-percent", "0"}, nil, 0},
	} {
		opts, err := parseConfig(c.args, env(c.env))
		if err != nil || opts.gcPercent != c.want {
			t.Errorf("%s: gc percent %d (%v), want %d", c.name, opts.gcPercent, err, c.want)
		}
	}
	if _, err := parseConfig([]string{"--gc-percent", "-1"}, env(nil)); err == nil || !strings.Contains(err.Error(), "gc-percent: must be at least 0") {
		t.Errorf("--gc-percent -1: %v, want an error naming the flag", err)
	}
}

// TestMinFreeBytesFlag: --min-free-bytes (or ORRERY_MIN_FREE_BYTES) sets the silo store's
// free-disk floor, by default silo.DefaultMinFreeBytes, so a small volume can run a silo.
func TestMinFreeBytesFlag(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want uint64
	}{
		{"default", nil, nil, silo.DefaultMinFreeBytes},
		{"flag", []string{"--min-free-bytes", "33554432"}, nil, 32 << 20},
		{"environment", nil, map[string]string{"ORRERY_MIN_FREE_BYTES": "16777216"}, 16 << 20},
	} {
		opts, err := parseConfig(c.args, env(c.env))
		if err != nil || opts.silo.Store.MinFreeBytes != c.want {
			t.Errorf("%s: floor %d (%v), want %d", c.name, opts.silo.Store.MinFreeBytes, err, c.want)
		}
	}
}

// TestASecondSiloOnTheSameDataRootExits: a silo started on a data root another silo process
// holds (other ports, its own cluster) exits non-zero with the store's lock error, and never
// says it is ready.
func TestASecondSiloOnTheSameDataRootExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	first := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: t.TempDir(), Partitions: 4})
	if mode := first.ReadyField("security"); mode != "INSECURE-DEV" {
		t.Errorf("an --insecure-dev silo's ready line says security=%q, want INSECURE-DEV", mode)
	}
	const bound = 3 * time.Second
	cmd := exec.Command(chaos.BuildSilo(t), "--data", first.Spec.DataDir, "--partitions", "4",
		"--port", fmt.Sprint(chaos.FreePort(t)), "--gossip-port", fmt.Sprint(chaos.FreePort(t)),
		"--admin", "127.0.0.1:0", "--open-timeout", bound.String(), "--insecure-dev")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("second silo: %v, want a non-zero exit\n%s", err, out.String())
		}
	case <-time.After(bound + 30*time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("second silo still running %v after its open timeout\n%s", bound+30*time.Second, out.String())
	}
	log := out.String()
	if strings.Contains(log, "silo ready") {
		t.Errorf("second silo said it was ready:\n%s", log)
	}
	if !strings.Contains(log, "held elsewhere") || !strings.Contains(log, "directory lock") {
		t.Errorf("second silo's output lacks the store's lock error:\n%s", log)
	}
}

// TestCPUProfileFlag: --cpu-profile writes a CPU profile of the silo's run, complete once the
// silo stops by SIGTERM (pprof's gzipped protobuf), and a file that cannot be created stops
// the start with an error naming the flag.
func TestCPUProfileFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real silo process")
	}
	if _, err := parseConfig(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	p := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: t.TempDir(), Partitions: 2, Args: []string{"--cpu-profile", path}})
	if err := p.Terminate(30 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Log())
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("profile after the stop: %d bytes (%v), want a gzipped pprof profile", len(data), err)
	}
	err = run([]string{"--cpu-profile", filepath.Join(t.TempDir(), "missing", "cpu.pprof"), "--data", t.TempDir(), "--insecure-dev"}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "cpu-profile") {
		t.Fatalf("an uncreatable profile file: %v, want an error naming the flag", err)
	}
}

// TestLimitFlags: the limit flags default to input.DefaultLimits(), take values from the
// command line or the environment, and a bad value names its flag.
func TestLimitFlags(t *testing.T) {
	none := func(string) string { return "" }
	opts, err := parseConfig(nil, none)
	if err != nil || opts.silo.Limits != input.DefaultLimits() {
		t.Fatalf("default limits %+v (%v)", opts.silo.Limits, err)
	}
	env := map[string]string{"ORRERY_MAX_PAYLOAD_BYTES": "1024", "ORRERY_LEDGER_RETENTION": "48h"}
	opts, err = parseConfig([]string{"--max-lane-messages", "7", "--max-lease", "1m", "--max-mutations-per-batch", "9",
		"--max-headers-bytes", "100", "--max-state-bytes", "200", "--max-lane-bytes", "300", "--receipt-retention", "2h",
		"--tombstone-retention", "3h", "--audit-retention", "240h", "--priority-step", "0s"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := input.DefaultLimits()
	want.MaxPayloadBytes, want.LedgerRetentionMicros, want.MaxLaneMessages, want.MaxLeaseMicros = 1024, 48*3600*input.Second, 7, 60*input.Second
	want.MaxMutationsPerBatch, want.MaxHeadersBytes, want.MaxStateBytes, want.MaxLaneBytes = 9, 100, 200, 300
	want.ReceiptRetentionMicros, want.TombstoneRetentionMicros = 2*3600*input.Second, 3*3600*input.Second
	want.AuditRetentionMicros = 240 * 3600 * input.Second
	want.PriorityStepMicros = 0 // strict
	if opts.silo.Limits != want {
		t.Fatalf("limits %+v, want %+v", opts.silo.Limits, want)
	}
	for _, bad := range [][]string{{"--max-payload-bytes", "0"}, {"--max-lane-messages", "0"}, {"--max-lease", "1s"},
		{"--ledger-retention", "10ms"}, {"--max-state-bytes", "-5"}, {"--receipt-retention", "soon"}, {"--audit-retention", "0s"},
		{"--priority-step", "25h"}, {"--priority-step", "-1s"}} {
		if _, err := parseConfig(bad, none); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("%v: error %v should name the flag", bad, err)
		}
	}
}

// TestASmallerMaxPayloadIsEnforced: a silo started with ORRERY_MAX_PAYLOAD_BYTES refuses a
// larger enqueue with a Validation error naming the payload.
func TestASmallerMaxPayloadIsEnforced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	p := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: t.TempDir(), Partitions: 4, Env: []string{"ORRERY_MAX_PAYLOAD_BYTES=1024"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{p.GossipAddress()}, Options: client.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lane := &orreryv1.Lane{Namespace: "limits", Queue: "q", Key: "k"}
	small := `{"x":"` + strings.Repeat("a", 900) + `"}`
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "small", PayloadJson: small}); err != nil {
		t.Fatalf("a payload under the limit: %v", err)
	}
	large := `{"x":"` + strings.Repeat("a", 1100) + `"}`
	_, err = c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "large", PayloadJson: large})
	if e := orrery.AsError(err); e.Code != orrery.CodeValidation || !strings.HasSuffix(e.Field, "payload_json") {
		t.Fatalf("a payload over the limit: %v (field %q)", err, e.Field)
	}
}

// TestLogFormatFlag: --log-format defaults to text, takes json (from the command line or
// ORRERY_LOG_FORMAT) and refuses anything else naming the flag; json writes one JSON object a
// line with the level and message, text writes key=value lines.
func TestLogFormatFlag(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.logFormat != "text" {
		t.Fatalf("default log-format %q (%v)", opts.logFormat, err)
	}
	env := func(k string) string {
		if k == "ORRERY_LOG_FORMAT" {
			return "json"
		}
		return ""
	}
	if opts, err := parseConfig(nil, env); err != nil || opts.logFormat != "json" {
		t.Fatalf("ORRERY_LOG_FORMAT=json: %q (%v)", opts.logFormat, err)
	}
	if _, err := parseConfig([]string{"--log-format", "xml"}, none); err == nil || !strings.Contains(err.Error(), "log-format") {
		t.Fatalf("--log-format xml: error %v should name the flag", err)
	}
	var out bytes.Buffer
	newLogger(&out, "json", slog.LevelInfo).Info("silo ready", "partitions", 8)
	newLogger(&out, "json", slog.LevelInfo).Debug("below the level")
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("json log %q: %v", out.String(), err)
	}
	if line["level"] != "INFO" || line["msg"] != "silo ready" || line["partitions"] != float64(8) {
		t.Fatalf("json log line %v", line)
	}
	out.Reset()
	newLogger(&out, "text", slog.LevelInfo).Info("silo ready", "partitions", 8)
	if got := out.String(); !strings.Contains(got, `level=INFO msg="silo ready" partitions=8`) {
		t.Fatalf("text log line %q", got)
	}
}

func TestInsecureDevAndGrantsFileFlags(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.silo.InsecureDev || len(opts.silo.Grants) != 0 {
		t.Fatalf("defaults: %+v %v", opts.silo, err)
	}
	file := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(file, []byte(`[{"principal": "ops", "rules": [{"namespace": "*", "capabilities": ["PolicyAdmin"]}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := parseConfig([]string{"--insecure-dev", "--grants-file", file}, none)
	if err != nil || !opts.silo.InsecureDev || len(opts.silo.Grants) != 1 || opts.silo.Grants[0].GetPrincipal() != "ops" {
		t.Fatalf("flags: %+v %v", opts.silo, err)
	}
	if err := os.WriteFile(file, []byte(`[{"principal": "ops", "rules": [{"namespace": "*", "capabilities": ["Root"]}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseConfig([]string{"--grants-file", file}, none); err == nil || !strings.Contains(err.Error(), "grants-file") {
		t.Fatalf("a bad grants file: %v", err)
	}
}

func TestTLSFlags(t *testing.T) {
	none := func(string) string { return "" }
	opts, err := parseConfig([]string{"--tls-ca", "ca.pem", "--tls-cert", "silo-a.pem", "--tls-key", "silo-a-key.pem"}, none)
	if err != nil {
		t.Fatal(err)
	}
	if c := opts.silo; c.TLSCA != "ca.pem" || c.TLSCert != "silo-a.pem" || c.TLSKey != "silo-a-key.pem" {
		t.Errorf("TLS files %q %q %q", c.TLSCA, c.TLSCert, c.TLSKey)
	}
}

// TestCredentialFlags: --admin-tokens-file and --gossip-key-file read the silo's credentials
// (from the environment too); a bad file is refused naming its flag.
func TestCredentialFlags(t *testing.T) {
	dir := t.TempDir()
	tokens, key := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(tokens, []byte(`[{"principal": "ops", "sha256": "`+strings.Repeat("ab", 32)+`"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(strings.Repeat("0f", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ORRERY_GOSSIP_KEY_FILE": key}
	opts, err := parseConfig([]string{"--admin-tokens-file", tokens}, func(k string) string { return env[k] })
	if err != nil || len(opts.silo.AdminTokens) != 1 || opts.silo.AdminTokens[0].Principal != "ops" || len(opts.silo.GossipKey) != 32 {
		t.Fatalf("credential flags: %+v %v", opts.silo, err)
	}
	if err := os.WriteFile(key, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	none := func(string) string { return "" }
	if _, err := parseConfig([]string{"--gossip-key-file", key}, none); err == nil || !strings.Contains(err.Error(), "gossip-key-file") {
		t.Errorf("a bad gossip key file: %v", err)
	}
	if _, err := parseConfig([]string{"--admin-tokens-file", key}, none); err == nil || !strings.Contains(err.Error(), "admin-tokens-file") {
		t.Errorf("a bad admin tokens file: %v", err)
	}
}

// TestASiloWithoutCredentialsExits: a silo process without credentials and without
// --insecure-dev exits non-zero naming each missing flag, never ready; with both credential
// files it starts and its ready line says security=tokens+gossip-key+mtls.
func TestASiloWithoutCredentialsExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real silo process")
	}
	out, err := exec.Command(chaos.BuildSilo(t), "--data", t.TempDir(), "--port", "0", "--gossip-port", "0", "--admin", "127.0.0.1:0").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || strings.Contains(string(out), "silo ready") {
		t.Fatalf("a silo without credentials: %v, want exit 2 and no ready line\n%s", err, out)
	}
	for _, want := range []string{"--admin-tokens-file", "--gossip-key-file", "--tls-ca/--tls-cert/--tls-key", "--insecure-dev"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal lacks %s:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	tokens, key := filepath.Join(dir, "tokens.json"), filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(tokens, []byte(`[{"principal": "ops", "sha256": "`+strings.Repeat("ab", 32)+`"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(strings.Repeat("0f", 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := transportauth.WriteDevelopment(dir, []string{"test"}, nil, nil, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	tls := transportauth.NodeFiles(dir, "silo-test")
	cmd := exec.Command(chaos.BuildSilo(t), "--data", filepath.Join(dir, "data"), "--port", "0", "--gossip-port", "0", "--admin", "127.0.0.1:0",
		"--partitions", "2", "--admin-tokens-file", tokens, "--gossip-key-file", key,
		"--tls-ca", tls.CA, "--tls-cert", tls.Cert, "--tls-key", tls.Key)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if line := scanner.Text(); strings.HasPrefix(line, "silo ready") {
				ready <- line
				return
			}
		}
		close(ready)
	}()
	select {
	case line := <-ready:
		if !strings.Contains(line, " security=tokens+gossip-key+mtls") {
			t.Errorf("a silo with credentials is ready with %q, want security=tokens+gossip-key+mtls", line)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a silo with credentials not ready within 60s")
	}
}

// TestOTLPEndpointFlag: --otlp-endpoint (or ORRERY_OTLP_ENDPOINT) sets the silo's collector;
// traces are off by default.
func TestOTLPEndpointFlag(t *testing.T) {
	none := func(string) string { return "" }
	if opts, err := parseConfig(nil, none); err != nil || opts.silo.OTLPEndpoint != "" {
		t.Fatalf("default endpoint %q (%v), want none", opts.silo.OTLPEndpoint, err)
	}
	if opts, err := parseConfig([]string{"--otlp-endpoint", "collector:4318"}, none); err != nil || opts.silo.OTLPEndpoint != "collector:4318" {
		t.Fatalf("flag endpoint %q (%v)", opts.silo.OTLPEndpoint, err)
	}
	env := func(k string) string {
		return map[string]string{"ORRERY_OTLP_ENDPOINT": "https://c.example/v1/traces"}[k]
	}
	if opts, err := parseConfig(nil, env); err != nil || opts.silo.OTLPEndpoint != "https://c.example/v1/traces" {
		t.Fatalf("environment endpoint %q (%v)", opts.silo.OTLPEndpoint, err)
	}
}

// TestTheBinaryArmsTheTestHooksFromItsEnvironment: the silo binary, and only it, reads the
// hooks the process tests set: a failpoint, Raft transport faults and their file, a replica
// that diverges on purpose; a bad value names its variable.
func TestTheBinaryArmsTheTestHooksFromItsEnvironment(t *testing.T) {
	env := map[string]string{partition.FailpointEnv: "entry-applied:2", raftnet.FaultsEnv: "drop:7",
		raftnet.FaultsFileEnv: "/tmp/faults", partition.DivergeEnv: "5"}
	opts, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.silo
	if name, at := cfg.Failpoints.Armed(); name != partition.FailpointEntryApplied || at != 2 {
		t.Fatalf("failpoint %q at %d, want entry-applied at 2", name, at)
	}
	if cfg.RaftFaults.String() != "drop:7" || cfg.RaftFaultsFile != "/tmp/faults" || !slices.Equal(cfg.Diverge, []int{5}) {
		t.Fatalf("faults %q, file %q, diverge %v", cfg.RaftFaults.String(), cfg.RaftFaultsFile, cfg.Diverge)
	}
	for name, bad := range map[string]string{partition.FailpointEnv: "nope", raftnet.FaultsEnv: "cut:x", partition.DivergeEnv: "-1",
		clockOffsetEnv: "soon"} {
		if _, err := parseConfig(nil, func(k string) string {
			if k == name {
				return bad
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming the variable", name, bad, err)
		}
	}
}

// TestClockOffsetComesFromItsVariable: ORRERY_CLOCK_OFFSET (the name the chaos harness sets)
// moves the silo's clock by a signed duration; unset, the silo keeps the real clock.
func TestClockOffsetComesFromItsVariable(t *testing.T) {
	if chaos.ClockOffsetEnv != clockOffsetEnv {
		t.Fatalf("the chaos harness sets %s, the binary reads %s", chaos.ClockOffsetEnv, clockOffsetEnv)
	}
	for spec, want := range map[string]time.Duration{"+7m": 7 * time.Minute, "-90s": -90 * time.Second} {
		opts, err := parseConfig(nil, func(k string) string {
			if k == clockOffsetEnv {
				return spec
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if opts.silo.Clock == nil {
			t.Fatalf("%s=%s: no clock set", clockOffsetEnv, spec)
		}
		if got := opts.silo.Clock.Now().Sub(time.Now()); got < want-time.Second || got > want+time.Second {
			t.Errorf("%s=%s: the clock is %v off, want %v", clockOffsetEnv, spec, got, want)
		}
	}
	opts, err := parseConfig(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if opts.silo.Clock != nil {
		t.Errorf("without %s the binary set a clock", clockOffsetEnv)
	}
}

// TestAnOffsetClockStampsAndSchedules: a silo started with its clock 10 minutes ahead stamps
// logged time 10 minutes ahead, and its due coordinator fires a timer due 3 minutes from the
// real now at once, by its own clock.
func TestAnOffsetClockStampsAndSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	p := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: t.TempDir(), Partitions: 4, Env: []string{clockOffsetEnv + "=+10m"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{p.GossipAddress()}, Options: client.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lane := &orreryv1.Lane{Namespace: "skew", Queue: "q", Key: "enqueued"}
	sent := time.Now()
	if _, err := c.Enqueue(ctx, &orreryv1.Enqueue{Lane: lane, Id: "m", PayloadJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := c.InspectLane(ctx, lane, "", 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("inspect: %v, %d messages", err, len(msgs))
	}
	if ahead := time.UnixMicro(msgs[0].GetEnqueuedAtUnixMicros()).Sub(sent); ahead < 9*time.Minute || ahead > 11*time.Minute {
		t.Fatalf("enqueued at a logged time %v after the real send, want about 10m", ahead)
	}
	timerLane := &orreryv1.Lane{Namespace: "skew", Queue: "q", Key: "timer"}
	configured := time.Now()
	due := configured.Add(3 * time.Minute).Truncate(time.Second)
	if _, err := c.ConfigureSchedule(ctx, &orreryv1.ScheduleDefinition{Lane: timerLane, ScheduleId: "0b5e0c6a-7f7e-4c39-9a3e-3c5a2f5e9d01", Spec: client.At(due),
		Template: &orreryv1.MessageTemplate{PayloadJson: `{}`}}, 0); err != nil {
		t.Fatal(err)
	}
	for {
		msgs, _, err := c.InspectLane(ctx, timerLane, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) > 0 {
			if nominal := time.UnixMicro(msgs[0].GetOccurrence().GetNominalDueAtUnixMicros()); !nominal.Equal(due) {
				t.Fatalf("the timer's occurrence has nominal instant %v, want %v", nominal, due)
			}
			break
		}
		if time.Since(configured) > 15*time.Second {
			t.Fatalf("a timer due %v from now on the real clock did not fire within 15 s on a silo 10m ahead", time.Until(due).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFreeBytesComeFromTheFileWhileItExists: with ORRERY_FREE_BYTES_FILE (the name the chaos
// harness sets) the store's free space is the file's byte count while it exists, and the
// disk's own figure once it is gone.
func TestFreeBytesComeFromTheFileWhileItExists(t *testing.T) {
	if chaos.FreeBytesFileEnv != freeBytesFileEnv {
		t.Fatalf("the chaos harness sets %s, the binary reads %s", chaos.FreeBytesFileEnv, freeBytesFileEnv)
	}
	path := filepath.Join(t.TempDir(), "free")
	opts, err := parseConfig(nil, func(k string) string {
		if k == freeBytesFileEnv {
			return path
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	free := opts.silo.Store.FreeBytesFunc
	if free == nil {
		t.Fatalf("%s set, no FreeBytesFunc", freeBytesFileEnv)
	}
	dir := t.TempDir()
	if got, err := free(dir); err != nil || got == 0 {
		t.Fatalf("no file: %d, %v; want the disk's free bytes", got, err)
	}
	if err := os.WriteFile(path, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := free(dir); err != nil || got != 0 {
		t.Fatalf("file says 0: %d, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("lots"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := free(dir); err == nil || !strings.Contains(err.Error(), freeBytesFileEnv) {
		t.Fatalf("a file that is no byte count: %v, want an error naming the variable", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got, err := free(dir); err != nil || got == 0 {
		t.Fatalf("file removed: %d, %v; want the disk's free bytes", got, err)
	}
	none, err := parseConfig(nil, func(string) string { return "" })
	if err != nil || none.silo.Store.FreeBytesFunc != nil {
		t.Fatalf("without %s: FreeBytesFunc set (%v)", freeBytesFileEnv, err)
	}
}
