package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// server is a process the harness started: a silo, or a PostgreSQL postmaster.
type server struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited closes
}

// startServer starts cmd in a process group of its own (so a Ctrl-C at the terminal reaches
// the harness alone, which stops it), killed with deathSignal should the harness die first,
// its stdout and stderr appended to logPath unless cmd already has a Stdout.
func startServer(name string, cmd *exec.Cmd, logPath string, deathSignal syscall.Signal) (*server, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	cmd.Stderr = logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = deathSignal
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	return s, nil
}

// pid is the server's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

// running reports whether the process has not exited yet.
func (s *server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop sends sig to the process, waits up to grace for it to exit, and then kills its process
// group (the process and every child it left).
func (s *server) stop(sig syscall.Signal, grace time.Duration) {
	if s.running() {
		_ = s.cmd.Process.Signal(sig)
		select {
		case <-s.exited:
		case <-time.After(grace):
			fmt.Fprintf(os.Stderr, "peers: %s did not stop within %v after %v, killing its process group\n", s.name, grace, sig)
		}
	}
	// The group may hold children still exiting (a postmaster's backends); it is ours alone.
	_ = syscall.Kill(-s.pid(), syscall.SIGKILL)
	<-s.exited
}

// exitError describes how the process ended, with the tail of its log.
func (s *server) exitError() error {
	return fmt.Errorf("%s exited (%v); the end of its log:\n%s", s.name, s.waitErr, logTail(s.logPath, 30))
}

// logTail returns the last n lines of the file at path.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-n):], "\n  ")
}

// freePort returns a TCP port on 127.0.0.1 that was free when asked.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address: " + ln.Addr().String())
	}
	return addr.Port, nil
}

// cleanEnv is the harness's environment without ORRERY_* variables, which the silo would read
// as flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ORRERY_") {
			env = append(env, kv)
		}
	}
	return env
}
