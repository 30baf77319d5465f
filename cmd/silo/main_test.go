package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orreryhq/orrery/chaos"
)

func TestFlagsOverrideEnvironment(t *testing.T) {
	env := map[string]string{"ORRERY_DATA": "/env/data", "ORRERY_PORT": "9000", "ORRERY_SEEDS": "a:1, b:2", "ORRERY_GOSSIP_PORT": "9001", "ORRERY_COORDINATOR_EMITS": "true"}
	opts, err := parseConfig([]string{"--port", "9100"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.silo
	if cfg.DataDir != "/env/data" || cfg.Port != 9100 || cfg.GossipPort != 9001 || strings.Join(cfg.Seeds, ",") != "a:1,b:2" || !cfg.CoordinatorEmits {
		t.Fatalf("config %+v", cfg)
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
}

// TestMaxProcsDefaultsToSeveralPerCPUUnlessTheOperatorChose: by default the binary runs with
// defaultProcsPerCPU per processor Go chose; the GOMAXPROCS environment variable or a
// negative --max-procs leaves it alone; an explicit value is taken.
func TestMaxProcsDefaultsToSeveralPerCPUUnlessTheOperatorChose(t *testing.T) {
	none := func(string) string { return "" }
	operator := func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	}
	opts, err := parseConfig(nil, none)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag   int
		getenv func(string) string
		want   int
	}{{opts.maxProcs, none, defaultProcsPerCPU * 2}, {5, none, 5}, {0, operator, 0}, {5, operator, 5}, {-1, none, 0}} {
		if got := maxProcs(c.flag, c.getenv, 2); got != c.want {
			t.Errorf("maxProcs(%d, GOMAXPROCS=%q, 2) = %d, want %d", c.flag, c.getenv("GOMAXPROCS"), got, c.want)
		}
	}
	if opts, err := parseConfig([]string{"--max-procs", "7"}, none); err != nil || opts.maxProcs != 7 {
		t.Errorf("--max-procs 7: %d (%v)", opts.maxProcs, err)
	}
}

// TestASecondSiloOnTheSameDataRootExits: a silo started on a data root another silo process
// holds (other ports, its own cluster) exits non-zero within --open-timeout with the lock
// error, and never says it is ready.
func TestASecondSiloOnTheSameDataRootExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real silo processes")
	}
	first := chaos.StartSilo(t, &chaos.SiloSpec{DataDir: t.TempDir(), Partitions: 4})
	const bound = 3 * time.Second
	cmd := exec.Command(chaos.BuildSilo(t), "--data", first.Spec.DataDir, "--partitions", "4",
		"--port", fmt.Sprint(chaos.FreePort(t)), "--gossip-port", fmt.Sprint(chaos.FreePort(t)),
		"--admin", "127.0.0.1:0", "--open-timeout", bound.String())
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
	if !strings.Contains(log, "did not open within") || !strings.Contains(log, "directory lock") {
		t.Errorf("second silo's output lacks the partitions and the lock error:\n%s", log)
	}
	if warns := strings.Count(log, "partition store not available"); warns > 2*4 {
		t.Errorf("%d open-failure lines for 4 partitions in %v:\n%s", warns, bound, log)
	}
}
