package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// siloTable is the part of GET /v1/silos the table shows.
type siloTable struct {
	Silo  string `json:"silo"`
	Silos []struct {
		SiloID   string  `json:"silo_id"`
		Address  *string `json:"address"`
		Alive    bool    `json:"alive"`
		Leads    int     `json:"leads"`
		Replicas int     `json:"replicas"`
	} `json:"silos"`
}

// silos prints the silos one silo's admin endpoint knows of: id, actor address, how many
// partitions each leads and replicates (as that silo's replicas see them), and whether it is a
// live member.
func (c *command) silos(ctx context.Context, args []string) error {
	fs := c.flagSet("silos")
	admin := adminFlag(fs)
	if _, err := c.parse(fs, args, false); err != nil {
		return err
	}
	body, url, err := c.adminGet(ctx, *admin, "/v1/silos")
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.writeAdminJSON(body, url)
	}
	var tab siloTable
	if err := json.Unmarshal(body, &tab); err != nil {
		return fmt.Errorf("GET %s: not a silo table: %w", url, err)
	}
	fmt.Fprintf(c.stdout, "as seen by silo %s\n", tab.Silo)
	t := newTable(c.stdout, "SILO", "ADDRESS", "LEADS", "REPLICAS", "ALIVE")
	for _, s := range tab.Silos {
		address := ""
		if s.Address != nil {
			address = *s.Address
		}
		t.row(s.SiloID, address, strconv.Itoa(s.Leads), strconv.Itoa(s.Replicas), strconv.FormatBool(s.Alive))
	}
	return t.flush()
}
