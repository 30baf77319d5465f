package silo

import (
	"fmt"

	"github.com/orreryhq/orrery/cluster"
)

// joinError describes a failed join: the data dir and the ids its store holds, then the
// cluster's reason, and what to set when a silo that only joins found no cluster.
func joinError(cfg Config, siloID, storedClusterID uint64, err error) error {
	stored := "no cluster yet"
	if storedClusterID != 0 {
		stored = "cluster " + cluster.FormatID(storedClusterID)
	}
	hint := ""
	if storedClusterID == 0 && cfg.BootstrapExpect == 0 && len(cfg.Seeds) > 0 {
		hint = " (BootstrapExpect, --bootstrap-expect, is 0: this silo joins an existing cluster and never creates one; " +
			"to create a cluster, start every founding silo with --bootstrap-expect N, N their number)"
	}
	return fmt.Errorf("join cluster %q: silo %s with data dir %s (%s): %w%s",
		cfg.ClusterName, cluster.FormatID(siloID), cfg.DataDir, stored, err, hint)
}
