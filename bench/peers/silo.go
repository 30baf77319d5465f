package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// siloStartTimeout bounds a fresh silo's start: forming its cluster and opening its partitions.
const siloStartTimeout = 90 * time.Second

// buildSilo builds the silo binary of the repository at root into out.
func buildSilo(ctx context.Context, root, out string) error {
	if _, err := os.Stat(filepath.Join(root, "cmd", "silo")); err != nil {
		return fmt.Errorf("no Orrery repository at %s (-root): %w", root, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/silo")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/silo in %s: %w\n%s", root, err, output)
	}
	return nil
}

// siloProcess is one silo running as a separate process on a temporary data dir.
type siloProcess struct {
	*server
	dir    string
	gossip string // the gossip address clients dial
	admin  string // the admin HTTP address
}

// startSilo starts binary on its defaults with a fresh data dir, --insecure-dev, free loopback
// ports for its actor transport and gossip (port 0: the silo picks them and prints them on its
// ready line), a free admin port and the extra flags, and waits until its /readyz answers 200. The returned stop
// function kills it and removes its dir; it is also registered in reg.
func startSilo(ctx context.Context, binary string, extra []string, graceful bool, reg *cleanups) (*siloProcess, func(), error) {
	dir, err := os.MkdirTemp("", "orrery-peers-silo-")
	if err != nil {
		return nil, nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	admin := "127.0.0.1:" + strconv.Itoa(adminPort)
	args := append([]string{"--data", filepath.Join(dir, "data"), "--insecure-dev",
		"--port", "0", "--gossip-port", "0", "--admin", admin}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	srv, err := startServer("silo", cmd, filepath.Join(dir, "silo.log"), syscall.SIGKILL)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	s := &siloProcess{server: srv, dir: dir, admin: admin}
	// Killed, not stopped gracefully: its data dir is thrown away, and a lone silo's graceful
	// stop spends seconds offering leadership that no other silo can take. A silo writing a CPU
	// profile (graceful) gets SIGTERM, so that it writes the profile out.
	sig := syscall.SIGKILL
	if graceful {
		sig = syscall.SIGTERM
	}
	stop := reg.add(func() {
		s.stop(sig, 30*time.Second)
		os.RemoveAll(dir)
	})

	// The silo prints one line on stdout, "silo ready ... gossip=HOST:PORT ...", once it serves.
	ready := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			line := scanner.Text()
			if strings.HasPrefix(line, "silo ready ") {
				for _, field := range strings.Fields(line) {
					if gossip, ok := strings.CutPrefix(field, "gossip="); ok {
						ready <- gossip
					}
				}
			}
		}
	}()
	fail := func(err error) (*siloProcess, func(), error) {
		stop()
		return nil, nil, err
	}
	deadline := time.NewTimer(siloStartTimeout)
	defer deadline.Stop()
	for s.gossip == "" || !readyz(ctx, admin) {
		select {
		case s.gossip = <-ready:
		case <-s.exited:
			return fail(s.exitError())
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-deadline.C:
			return fail(fmt.Errorf("the silo was not ready within %v; the end of its log:\n%s", siloStartTimeout, logTail(s.logPath, 30)))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s, stop, nil
}

// readyz reports whether the admin endpoint at addr answers /readyz with 200.
func readyz(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// pids is the silo's process: its memory is the server memory of Orrery.
func (s *siloProcess) pids() []int { return []int{s.pid()} }
