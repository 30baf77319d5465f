package silo

import (
	"testing"

	"github.com/orreryhq/orrery/cluster/raftnet"
	"github.com/orreryhq/orrery/partition"
)

// TestAnEmbeddedSiloReadsNoTestHooksFromTheEnvironment: with the process tests' variables set
// in its environment, an embedded silo's defaults arm no failpoint (which would SIGKILL its
// host process), no transport fault, no faults file and no diverging replica: they reach a
// silo only through its Config (the silo binary sets them from its environment).
func TestAnEmbeddedSiloReadsNoTestHooksFromTheEnvironment(t *testing.T) {
	t.Setenv(partition.FailpointEnv, partition.FailpointEntryApplied)
	t.Setenv(raftnet.FaultsEnv, "drop:7")
	t.Setenv(raftnet.FaultsFileEnv, "/tmp/faults")
	t.Setenv(partition.DivergeEnv, "3")
	cfg, err := Config{InsecureDev: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := cfg.Failpoints.Armed(); name != "" {
		t.Fatalf("failpoint %q armed from the environment", name)
	}
	if cfg.RaftFaults.String() != "" || cfg.RaftFaultsFile != "" || len(cfg.Diverge) != 0 {
		t.Fatalf("from the environment: faults %q, file %q, diverge %v", cfg.RaftFaults.String(), cfg.RaftFaultsFile, cfg.Diverge)
	}
}
