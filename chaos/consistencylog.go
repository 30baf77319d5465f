package chaos

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/orreryhq/orrery/partition"
)

// inconsistencyAttrs picks a logged inconsistency's partition, index and replica out of its
// line (slog's text format: key=value).
var inconsistencyAttrs = regexp.MustCompile(`\b(partition|index|replica)=("[^"]*"|\S+)`)

// loggedInconsistencies are the divergences the silos' periodic consistency checks found
// while the run went on, in any process the run started (those killed or stopped since
// included): inconsistenciesLogged over each one's log.
func loggedInconsistencies(processes []*SiloProcess) []string {
	logs := make(map[string]string, len(processes))
	for _, p := range processes {
		logs[fmt.Sprintf("silo %s (pid %d)", p.SiloID(), p.PID())] = p.Log()
	}
	return inconsistenciesLogged(logs)
}

// inconsistenciesLogged reads logs (each process's log by a name for it) for the lines a
// partition's leader logs with partition.InconsistencyMessage, and returns one violation per
// divergent replica at a partition's index (however many lines name it), sorted.
func inconsistenciesLogged(logs map[string]string) []string {
	found := map[string]string{} // partition/index/replica → violation
	for who, log := range logs {
		for line := range strings.SplitSeq(log, "\n") {
			if !strings.Contains(line, partition.InconsistencyMessage) {
				continue
			}
			attrs := map[string]string{}
			for _, m := range inconsistencyAttrs.FindAllStringSubmatch(line, -1) {
				attrs[m[1]] = strings.Trim(m[2], `"`)
			}
			key := attrs["partition"] + "/" + attrs["index"] + "/" + attrs["replica"]
			if _, ok := found[key]; !ok {
				found[key] = fmt.Sprintf("partition %s at index %s: replica %s diverged from the majority (a periodic consistency check; logged by %s)",
					attrs["partition"], attrs["index"], attrs["replica"], who)
			}
		}
	}
	out := make([]string, 0, len(found))
	for _, v := range found {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
