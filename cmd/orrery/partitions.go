package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// partitionTable is the part of GET /v1/partitions the table shows.
type partitionTable struct {
	Silo       string `json:"silo"`
	Partitions []struct {
		Partition int `json:"partition"`
		Replica   *struct {
			LeaderSilo   *string  `json:"leader_silo"`
			Term         uint64   `json:"term"`
			AppliedIndex uint64   `json:"applied_index"`
			Voters       []string `json:"voters"`
			Learners     []string `json:"learners"`
			Progress     []struct {
				Silo string `json:"silo"`
				Lag  uint64 `json:"lag"`
			} `json:"progress"`
		} `json:"replica"`
		Error string `json:"error"`
	} `json:"partitions"`
}

// partitions prints every partition's Raft group as one silo's admin endpoint sees it (the only
// place that view exists): leader, voters, learners, term, applied index and, where that silo
// leads, each replica's lag (committed entries it does not hold yet).
func (c *command) partitions(ctx context.Context, args []string) error {
	fs := c.flagSet("partitions")
	admin := adminFlag(fs)
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	body, url, err := c.adminGet(ctx, *admin, "/v1/partitions")
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.writeAdminJSON(body, url)
	}
	var tab partitionTable
	if err := json.Unmarshal(body, &tab); err != nil {
		return fmt.Errorf("GET %s: not a partition table: %w", url, err)
	}
	fmt.Fprintf(c.stdout, "as seen by silo %s\n", tab.Silo)
	t := newTable(c.stdout, "PARTITION", "LEADER", "VOTERS", "LEARNERS", "TERM", "APPLIED", "LAG", "ERROR")
	for _, p := range tab.Partitions {
		row := []string{strconv.Itoa(p.Partition), "", "", "", "", "", "", p.Error}
		if r := p.Replica; r != nil {
			if r.LeaderSilo != nil {
				row[1] = *r.LeaderSilo
			}
			row[2] = strings.Join(r.Voters, ",")
			row[3] = strings.Join(r.Learners, ",")
			row[4] = strconv.FormatUint(r.Term, 10)
			row[5] = strconv.FormatUint(r.AppliedIndex, 10)
			lags := make([]string, len(r.Progress))
			for i, pr := range r.Progress {
				lags[i] = pr.Silo + "=" + strconv.FormatUint(pr.Lag, 10)
			}
			row[6] = strings.Join(lags, ",")
		} else if p.Error == "" {
			row[7] = "no replica on this silo"
		}
		t.row(row...)
	}
	return t.flush()
}
