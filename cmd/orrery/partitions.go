package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// defaultAdmin is --admin's default: a silo started with its default flags.
const defaultAdmin = "http://127.0.0.1:7380"

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
		} `json:"replica"`
		Error string `json:"error"`
	} `json:"partitions"`
}

// partitions prints every partition's Raft group as one silo's admin endpoint sees it (the only
// place that view exists): leader, voters, learners, term and applied index.
func (c *command) partitions(ctx context.Context, args []string) error {
	fs := c.flagSet("partitions")
	admin := defaultAdmin
	fs.StringVar(&admin, "admin", defaultAdmin, "a silo's admin endpoint (URL or host:port)")
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	url := strings.TrimSuffix(admin, "/") + "/v1/partitions"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usagef("admin: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	if c.output == "json" {
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("GET %s: not JSON: %w", url, err)
		}
		return writeJSON(c.stdout, doc)
	}
	var tab partitionTable
	if err := json.Unmarshal(body, &tab); err != nil {
		return fmt.Errorf("GET %s: not a partition table: %w", url, err)
	}
	fmt.Fprintf(c.stdout, "as seen by silo %s\n", tab.Silo)
	t := newTable(c.stdout, "PARTITION", "LEADER", "VOTERS", "LEARNERS", "TERM", "APPLIED", "ERROR")
	for _, p := range tab.Partitions {
		row := []string{strconv.Itoa(p.Partition), "", "", "", "", "", p.Error}
		if r := p.Replica; r != nil {
			if r.LeaderSilo != nil {
				row[1] = *r.LeaderSilo
			}
			row[2] = strings.Join(r.Voters, ",")
			row[3] = strings.Join(r.Learners, ",")
			row[4] = strconv.FormatUint(r.Term, 10)
			row[5] = strconv.FormatUint(r.AppliedIndex, 10)
		} else if p.Error == "" {
			row[6] = "no replica on this silo"
		}
		t.row(row...)
	}
	return t.flush()
}
