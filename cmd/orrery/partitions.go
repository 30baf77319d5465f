package main

import (
	"context"
	"encoding/json"
	"errors"
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
	if len(args) > 0 && args[0] == "check" {
		return c.checkPartitions(ctx, args[1:])
	}
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

// checkTable is the part of POST /v1/partitions/check the table shows.
type checkTable struct {
	Silo       string `json:"silo"`
	Consistent bool   `json:"consistent"`
	Partitions []struct {
		Partition int `json:"partition"`
		Check     *struct {
			Index      uint64 `json:"index"`
			Consistent bool   `json:"consistent"`
			Checksums  []struct {
				Silo string `json:"silo"`
			} `json:"checksums"`
			Divergent []string `json:"divergent"`
			Missing   []string `json:"missing"`
		} `json:"check"`
		Error *string `json:"error"`
	} `json:"partitions"`
}

// errInconsistent is the error of a check that found a partition not consistent.
var errInconsistent = errors.New("not every partition is consistent")

// checkPartitions runs a consistency check of every partition now, through one silo's admin
// endpoint, and prints each leader's verdict; it fails when any partition is not consistent.
func (c *command) checkPartitions(ctx context.Context, args []string) error {
	fs := c.flagSet("partitions check")
	admin := adminFlag(fs)
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	body, url, err := c.adminPost(ctx, *admin, "/v1/partitions/check")
	if err != nil {
		return err
	}
	var tab checkTable
	if err := json.Unmarshal(body, &tab); err != nil {
		return fmt.Errorf("POST %s: not a check table: %w", url, err)
	}
	if c.output == "json" {
		if err := c.writeAdminJSON(body, url); err != nil {
			return err
		}
	} else {
		t := newTable(c.stdout, "PARTITION", "INDEX", "CONSISTENT", "REPLICAS", "DIVERGENT", "MISSING", "ERROR")
		for _, p := range tab.Partitions {
			row := []string{strconv.Itoa(p.Partition), "", "", "", "", "", ""}
			if p.Check != nil {
				row[1], row[2] = strconv.FormatUint(p.Check.Index, 10), strconv.FormatBool(p.Check.Consistent)
				row[3] = strconv.Itoa(len(p.Check.Checksums))
				row[4], row[5] = strings.Join(p.Check.Divergent, ","), strings.Join(p.Check.Missing, ",")
			}
			if p.Error != nil {
				row[6] = *p.Error
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if !tab.Consistent {
		return errInconsistent
	}
	return nil
}
