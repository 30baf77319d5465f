package silo

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orreryhq/orrery"
	"github.com/orreryhq/orrery/client"
)

// TestDialFailsFastNamingEachSeed dials seeds that cannot let a client join: nothing listening,
// a silo's actor port instead of its gossip port, and a silo of another cluster name. Each Dial
// fails within its join timeout, long before the caller's deadline, with Unavailable and the
// seed named in the error.
func TestDialFailsFastNamingEachSeed(t *testing.T) {
	s := startSilo(t, t.TempDir(), nil)
	deadAddr := deadPort(t)

	cases := []struct {
		name, seed, cluster string
	}{
		{"dead seed", deadAddr, ""},
		{"actor port", s.ActorAddress(), ""},
		{"other cluster", s.GossipAddress(), "another-cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{tc.seed}, ClusterName: tc.cluster,
				JoinTimeout: 2 * time.Second, Options: client.Options{Logger: quiet}})
			took := time.Since(start)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, orrery.ErrUnavailable) {
				t.Errorf("error is not Unavailable: %v", err)
			}
			if !strings.Contains(err.Error(), "seeds ["+tc.seed+"] answered: failed to join "+tc.seed) {
				t.Errorf("error does not name the seed %s: %v", tc.seed, err)
			}
			if took > 10*time.Second {
				t.Errorf("dial took %v with a 2 s join timeout and a 30 s deadline", took)
			}
		})
	}
}

// deadPort returns a loopback TCP address that refuses connections until the test ends: a
// socket bound to it that never listens, so no other process can take the port meanwhile.
func deadPort(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// TestDialReturnsAtOnceWhenNothingListens: a Dial whose seed refuses the connection returns
// within a few join attempts, long before its 30 s join timeout, saying nothing listens there.
func TestDialReturnsAtOnceWhenNothingListens(t *testing.T) {
	seed := deadPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := client.Dial(ctx, client.DialConfig{Seeds: []string{seed}, JoinTimeout: 30 * time.Second, Options: client.Options{Logger: quiet}})
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("dial succeeded")
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, orrery.ErrUnavailable) || !strings.Contains(err.Error(), "nothing listens at the seeds") || !strings.Contains(err.Error(), seed) {
		t.Errorf("error is not Unavailable saying nothing listens at %s: %v", seed, err)
	}
	if took > 10*time.Second {
		t.Errorf("dial took %v against a seed that refuses connections", took)
	}
}
