package persistence

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"testing"
)

// crashChildEnv names the store directory of a crash test's child process: the test binary
// re-executed to run that test alone (killChild), which finds it set and plays the child's part
// instead of the parent's.
const crashChildEnv = "ORRERY_CRASH_CHILD_DIR"

// crashChildDir is the child's store directory, or "" in the parent.
func crashChildDir() string { return os.Getenv(crashChildEnv) }

// killChild is the one crash harness of the package's tests. It re-executes the test binary to
// run t's test alone as a child working in dir (crashChildDir), with env added to its
// environment; hands each line the child prints to reported until it returns true or the
// output ends; then SIGKILLs the child and waits for it. It returns whether reported returned
// true, and the child's stderr. It skips the test under -short.
func killChild(t *testing.T, dir string, env []string, reported func(line string) bool) (bool, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+t.Name()+"$")
	cmd.Env = append(append(os.Environ(), crashChildEnv+"="+dir), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	lines := bufio.NewScanner(stdout)
	for !done && lines.Scan() {
		done = reported(lines.Text())
	}
	_ = cmd.Process.Kill()
	_, _ = io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	return done, stderr.String()
}
