package main

import (
	"strings"
	"testing"
)

func TestFlagsOverrideEnvironment(t *testing.T) {
	env := map[string]string{"ORRERY_DATA": "/env/data", "ORRERY_PORT": "9000", "ORRERY_SEEDS": "a:1, b:2", "ORRERY_GOSSIP_PORT": "9001", "ORRERY_COORDINATOR_EMITS": "true"}
	cfg, _, err := parseConfig([]string{"--port", "9100"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/env/data" || cfg.Port != 9100 || cfg.GossipPort != 9001 || strings.Join(cfg.Seeds, ",") != "a:1,b:2" || !cfg.CoordinatorEmits {
		t.Fatalf("config %+v", cfg)
	}
}

func TestBadInputNamesTheSetting(t *testing.T) {
	_, _, err := parseConfig(nil, func(k string) string {
		if k == "ORRERY_PARTITIONS" {
			return "many"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "ORRERY_PARTITIONS") {
		t.Fatalf("error %v should name ORRERY_PARTITIONS", err)
	}
	if _, _, err := parseConfig([]string{"--log-level", "loud"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("error %v should name log-level", err)
	}
}
