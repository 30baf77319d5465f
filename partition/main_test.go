package partition

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started outlives them. It ignores
// protoactor's dead-letter throttle: a goroutine the actor system starts per throttle period,
// which ends by itself once the period is over (actor.NewThrottle).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
