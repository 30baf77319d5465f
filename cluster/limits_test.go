package cluster

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/remote"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/grains/input"
)

// TestAPeerSendQueueStartsSmall: protoactor allocates each peer's send queue at its configured
// size up front (a ring of that many interface slots that doubles when full); its default of
// 1,000,000 slots is 16 MB of heap for every silo and client a process talks to.
func TestAPeerSendQueueStartsSmall(t *testing.T) {
	cfg := remote.Configure("127.0.0.1", 0, remoteOptions(nil)...)
	if cfg.EndpointWriterQueueSize > 4096 {
		t.Fatalf("each peer's send queue starts with %d slots (%d bytes), want at most 4096", cfg.EndpointWriterQueueSize, cfg.EndpointWriterQueueSize*16)
	}
}

func TestCheckLimits(t *testing.T) {
	if err := CheckLimits(input.DefaultLimits()); err != nil {
		t.Fatalf("the default limits do not fit the transport: %v", err)
	}
	bigState := input.DefaultLimits()
	bigState.MaxStateBytes = 1 << 20
	bigReceive := input.DefaultLimits()
	bigReceive.MaxReceiveBytesPerCommand = 1 << 20
	for name, c := range map[string]struct {
		lim  input.Limits
		name string
	}{
		"command": {bigState, "max_state_bytes 1048576"},
		"reply":   {bigReceive, "max_receive_bytes_per_command 1048576"},
	} {
		err := CheckLimits(c.lim)
		if e := orrery.AsError(err); err == nil || e.Code != orrery.CodeValidation || e.Field != "limits" || !strings.Contains(e.Message, c.name) {
			t.Fatalf("%s: CheckLimits = %v, want Validation on limits naming %s", name, err, c.name)
		}
	}
}
