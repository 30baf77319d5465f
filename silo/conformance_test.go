package silo

import (
	"testing"

	"github.com/orreryhq/orrery/client"
	"github.com/orreryhq/orrery/client/clienttest"
)

// TestClusterTransportConforms runs the client's transport conformance (clienttest.Conformance,
// which the in-memory twin passes too) against a silo's cluster transport: one silo on
// loopback, over a temporary directory, stopped when the test ends.
func TestClusterTransportConformance(t *testing.T) {
	clienttest.Conformance(t, func(t *testing.T) client.Transport {
		return memberTransport{startSilo(t, t.TempDir(), nil)}
	})
}
