package silo

import (
	"context"
	"testing"
	"time"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/internal/testkit"
)

// TestAWrongGossipKeyNeverJoins: a silo and a client with another gossip key than the
// cluster's never join it (the silo fails to start, the client to dial, and the cluster never
// lists the silo); a silo and a client with the same key do.
func TestAWrongGossipKeyNeverJoins(t *testing.T) {
	t.Parallel()
	wrongKey := []byte("fedcba9876543210fedcba9876543210")
	first := startSilo(t, t.TempDir(), func(c *Config) { c.GossipKey = testGossipKey })
	waitReady(t, first)
	seeds := []string{first.GossipAddress()}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stray, err := Start(ctx, Config{DataDir: t.TempDir(), Partitions: 8, Admin: "off", Logger: quiet, InsecureDev: true,
		GossipKey: wrongKey, Seeds: seeds, OpenTimeout: 3 * time.Second})
	if err == nil {
		stray.Stop()
		t.Fatal("a silo with the wrong gossip key started")
	}
	t.Logf("wrong key: %v", err)
	if c, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, GossipKey: wrongKey, JoinTimeout: 2 * time.Second, Options: client.Options{Logger: quiet}}); err == nil {
		c.Close()
		t.Fatal("a client with the wrong gossip key dialed")
	}
	if c, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, JoinTimeout: 2 * time.Second, Options: client.Options{Logger: quiet}}); err == nil {
		c.Close()
		t.Fatal("a client without the gossip key dialed")
	}
	if n := len(first.liveSilos()); n != 1 {
		t.Fatalf("the cluster lists %d silos after the wrong key's attempt, want 1", n)
	}

	second := startSilo(t, t.TempDir(), func(c *Config) { c.GossipKey = testGossipKey; c.Seeds = seeds })
	testkit.Eventually(t, 20*time.Second, "the silo with the key in the first's topology", func() bool {
		_, ok := first.liveSilos()[second.SiloID()]
		return ok
	})
	c, err := client.Dial(ctx, client.DialConfig{Seeds: seeds, GossipKey: testGossipKey, Options: client.Options{Logger: quiet}})
	if err != nil {
		t.Fatalf("a client with the key: %v", err)
	}
	defer c.Close()
	if _, err := c.PartitionStatus(ctx, 0); err != nil {
		t.Fatalf("a client with the key asks partition 0: %v", err)
	}
}
