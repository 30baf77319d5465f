package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BuildSilo compiles cmd/silo once per test binary and returns its path.
func BuildSilo(t TB) string {
	t.Helper()
	buildOnce.Do(func() { binPath, buildErr = buildSilo("silo") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// BuildSiloVariant builds ./cmd/silo once per ldflags (go build -ldflags), for a silo that
// stands for another build of Orrery (SiloSpec.Binary), and returns the binary's path.
func BuildSiloVariant(t TB, ldflags string) string {
	t.Helper()
	variantsMu.Lock()
	defer variantsMu.Unlock()
	if path, ok := variants[ldflags]; ok {
		return path
	}
	path, err := buildSilo("silo-variant", "-ldflags", ldflags)
	if err != nil {
		t.Fatal(err)
	}
	variants[ldflags] = path
	return path
}

// buildSilo builds ./cmd/silo with the build flags into a new temporary directory.
func buildSilo(name string, flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "orrery-silo-bin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append(append([]string{"build", "-o", path}, flags...), "./cmd/silo")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/silo %v: %v\n%s", flags, err, out)
	}
	return path, nil
}

var (
	buildOnce  sync.Once
	binPath    string
	buildErr   error
	variantsMu sync.Mutex
	variants   = map[string]string{} // ldflags → binary
)

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// FreePort returns a loopback TCP port that was free a moment ago (and, for gossip, whose UDP
// twin was free too). It is chosen below the kernel's ephemeral range: a silo restarted on its
// old ports (see SiloSpec) would otherwise find one taken meanwhile by an outgoing connection
// or a port-0 listener of another test process, and fail with "address already in use".
func FreePort(t TB) int {
	t.Helper()
	low, high := portRange()
	for range 200 {
		port := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// portRange is where FreePort looks: from 20000 up to the start of the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; 32768 where it cannot be read).
func portRange() (low, high int) {
	low, high = 20000, 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(data), &first, &last); err == nil && first > low+1000 {
			high = first
		}
	}
	return low, high
}

// SiloSpec is how to run one silo process. Zero ports are chosen at Start and then kept, so a
// restart reuses them.
type SiloSpec struct {
	DataDir    string
	Port       int
	GossipPort int
	AdminPort  int
	Partitions int
	Seeds      []string
	// BootstrapExpect is --bootstrap-expect (0: the flag is not passed).
	BootstrapExpect int
	// Replicas is --replicas, how many silos hold each partition (0: the flag is not passed).
	Replicas int
	// DeadAfter is --dead-after, how long a silo may be missing before its replicas are
	// re-created elsewhere (0: the flag is not passed).
	DeadAfter time.Duration
	// LogLevel is --log-level (default "warn").
	LogLevel string
	// Args are further flags, appended after the others.
	Args []string
	// Env is added to the process environment (e.g. ORRERY_FAILPOINT=entry-applied).
	Env []string
	// Binary is the silo binary to run (BuildSiloVariant); "" runs BuildSilo's.
	Binary string
	// Isolatable starts the process in a cgroup v2 of its own, so that SiloProcess.Isolate can
	// cut all of its network traffic (see netcut.go). The cgroup is created at the first launch
	// and kept for the spec's later launches (Cluster.Restart), and removed when the test ends.
	// A test with isolatable silos is skipped, or fails under ORRERY_NETCUT_REQUIRED=1, where
	// the machine cannot isolate (RequireNetcut).
	Isolatable bool

	// cut is the cgroup of an Isolatable spec, from its first launch on.
	cut *netcut
}

// args renders the spec as the silo's command line.
func (spec *SiloSpec) args() []string {
	level := spec.LogLevel
	if level == "" {
		level = "warn"
	}
	args := []string{"--data", spec.DataDir, "--host", "127.0.0.1", "--port", fmt.Sprint(spec.Port),
		"--gossip-port", fmt.Sprint(spec.GossipPort), "--admin", fmt.Sprintf("127.0.0.1:%d", spec.AdminPort),
		"--partitions", fmt.Sprint(spec.Partitions), "--log-level", level, "--insecure-dev"}
	if len(spec.Seeds) > 0 {
		args = append(args, "--seeds", strings.Join(spec.Seeds, ","))
	}
	if spec.BootstrapExpect > 0 {
		args = append(args, "--bootstrap-expect", fmt.Sprint(spec.BootstrapExpect))
	}
	if spec.Replicas > 0 {
		args = append(args, "--replicas", fmt.Sprint(spec.Replicas))
	}
	if spec.DeadAfter > 0 {
		args = append(args, "--dead-after", spec.DeadAfter.String())
	}
	return append(args, spec.Args...)
}

// choosePorts fills the spec's zero ports with free ones and its zero partition count with 32.
func (spec *SiloSpec) choosePorts(t TB) {
	t.Helper()
	if spec.Port == 0 {
		spec.Port = FreePort(t)
	}
	if spec.GossipPort == 0 {
		spec.GossipPort = FreePort(t)
	}
	if spec.AdminPort == 0 {
		spec.AdminPort = FreePort(t)
	}
	if spec.Partitions == 0 {
		spec.Partitions = 32
	}
}

// SiloProcess is a running silo process.
type SiloProcess struct {
	Spec  SiloSpec
	cmd   *exec.Cmd
	ready chan string
	exit  chan error
	log   *lockedBuffer
	// readyLine is the "silo ready" line, once awaitReady has seen it.
	readyLine string
	paused    bool
}

// readyTimeout bounds how long StartSilo and StartCluster wait for a "silo ready" line.
const readyTimeout = 60 * time.Second

// StartSilo starts a silo process and waits (up to 60 s) for its "silo ready" line. The process
// is killed when the test ends.
func StartSilo(t TB, spec *SiloSpec) *SiloProcess {
	t.Helper()
	p, err := relaunchOnPortClash(t, spec, launchSilo(t, spec), readyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// portClashRelaunches is how many times relaunchOnPortClash starts a silo again.
const portClashRelaunches = 3

// relaunchOnPortClash waits up to timeout for p's ready line; when p exited because one of its
// ports was taken meanwhile (FreePort's port was free a moment before, but another test
// process may bind it first), it chooses that port again in spec and launches the silo again,
// up to portClashRelaunches times, each launch waited for up to timeout. A new gossip port
// leaves the other silos' seeds naming the old one: the silo joins them through theirs, and
// they reach it through its own gossip.
func relaunchOnPortClash(t TB, spec *SiloSpec, p *SiloProcess, timeout time.Duration) (*SiloProcess, error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := p.awaitReady(timeout)
		if err == nil || attempt == portClashRelaunches {
			return p, err
		}
		port := p.clashedPort()
		switch {
		case port == 0:
			return p, err
		case port == spec.AdminPort:
			spec.AdminPort = FreePort(t)
		case port == spec.Port:
			spec.Port = FreePort(t)
		case port == spec.GossipPort:
			spec.GossipPort = FreePort(t)
		}
		t.Logf("silo %s: port %d was taken before it could listen; choosing another", p.GossipAddress(), port)
		p = launchSilo(t, spec)
	}
}

// clashedPort is the port of the process's own (admin, actor or gossip) that its log says
// was already in use, 0 otherwise. The port is read from the listen call that failed, never
// from the rest of the line, which names other addresses of the silo too.
func (p *SiloProcess) clashedPort() int {
	for _, m := range bindFailed.FindAllStringSubmatch(p.log.String(), -1) {
		port, _ := strconv.Atoi(m[1])
		if port == p.Spec.AdminPort || port == p.Spec.Port || port == p.Spec.GossipPort {
			return port
		}
	}
	return 0
}

// bindFailed matches a listen that failed because its port was taken.
var bindFailed = regexp.MustCompile(`listen (?:tcp|udp) 127\.0\.0\.1:(\d+): bind: address already in use`)

// launchSilo starts a silo process without waiting for it to be ready, choosing the spec's
// zero ports first, in the spec's cgroup when it is Isolatable (created at its first launch).
// The process is killed when the test ends.
func launchSilo(t TB, spec *SiloSpec) *SiloProcess {
	t.Helper()
	bin := spec.Binary
	if bin == "" {
		bin = BuildSilo(t)
	}
	spec.choosePorts(t)
	cmd := exec.Command(bin, spec.args()...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Isolatable {
		if spec.cut == nil {
			spec.cut = newNetcut(t)
		}
		dir, err := spec.cut.startIn(cmd.SysProcAttr)
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close() // once the process started in it
	}
	p := &SiloProcess{Spec: *spec, cmd: cmd, ready: make(chan string, 1), exit: make(chan error, 1), log: &lockedBuffer{}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	go func() {
		scan := bufio.NewScanner(stdout)
		for scan.Scan() {
			line := scan.Text()
			p.log.Write([]byte(line + "\n"))
			if strings.HasPrefix(line, "silo ready") {
				p.ready <- line
			}
		}
	}()
	go func() { p.exit <- cmd.Wait() }()
	return p
}

// awaitReady waits up to timeout for the "silo ready" line (at once when it was seen before);
// the error carries the log.
func (p *SiloProcess) awaitReady(timeout time.Duration) error {
	if p.readyLine != "" {
		return nil
	}
	select {
	case line := <-p.ready:
		p.readyLine = line
		return nil
	case err := <-p.exit:
		p.exit <- err
		return fmt.Errorf("silo %s exited before ready: %v\n%s", p.GossipAddress(), err, p.log.String())
	case <-time.After(timeout):
		return fmt.Errorf("silo %s not ready within %v\n%s", p.GossipAddress(), timeout, p.log.String())
	}
}

// PrintedReady reports, without waiting, whether the process has printed its "silo ready"
// line so far (from then on ReadyField and SiloID read it).
func (p *SiloProcess) PrintedReady() bool {
	if p.readyLine != "" {
		return true
	}
	select {
	case line := <-p.ready:
		p.readyLine = line
		return true
	default:
		return false
	}
}

// ReadyField is the value of key=value in the process's "silo ready" line (id, silo, cluster,
// actor, gossip, admin, data, partitions), empty when absent.
func (p *SiloProcess) ReadyField(key string) string {
	for _, field := range strings.Fields(p.readyLine) {
		if k, v, ok := strings.Cut(field, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// SiloID is the silo id (16 hex digits) the process printed in its ready line.
func (p *SiloProcess) SiloID() string { return p.ReadyField("silo") }

// ClusterID is the cluster id (16 hex digits) the process printed in its ready line.
func (p *SiloProcess) ClusterID() string { return p.ReadyField("cluster") }

// GossipAddress is where clients and other silos join.
func (p *SiloProcess) GossipAddress() string { return fmt.Sprintf("127.0.0.1:%d", p.Spec.GossipPort) }

// AdminAddress is the admin HTTP address.
func (p *SiloProcess) AdminAddress() string { return fmt.Sprintf("127.0.0.1:%d", p.Spec.AdminPort) }

// PID is the process id.
func (p *SiloProcess) PID() int { return p.cmd.Process.Pid }

// Log returns what the process printed so far.
func (p *SiloProcess) Log() string { return p.log.String() }

// Kill sends SIGKILL to the process group and waits for the exit (a paused process is killed
// too).
func (p *SiloProcess) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.Wait(10 * time.Second)
}

// Pause sends SIGSTOP to the process group: the process keeps its sockets but runs no more
// until Resume.
func (p *SiloProcess) Pause() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		return err
	}
	p.paused = true
	return nil
}

// Resume sends SIGCONT to the process group.
func (p *SiloProcess) Resume() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return err
	}
	p.paused = false
	return nil
}

// Paused reports whether Pause was the last of Pause and Resume.
func (p *SiloProcess) Paused() bool { return p.paused }

// Terminate sends SIGTERM (graceful shutdown) and waits up to timeout for the exit.
func (p *SiloProcess) Terminate(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait(timeout)
}

// Wait waits up to timeout for the process to exit and returns its exit error.
func (p *SiloProcess) Wait(timeout time.Duration) error {
	select {
	case err := <-p.exit:
		p.exit <- err // later waits see it too
		return err
	case <-time.After(timeout):
		return fmt.Errorf("silo %d did not exit within %v", p.PID(), timeout)
	}
}

// Exited reports whether the process has exited.
func (p *SiloProcess) Exited() bool {
	select {
	case err := <-p.exit:
		p.exit <- err
		return true
	default:
		return false
	}
}

// WaitReady polls the admin /readyz until it answers 200 or ctx ends.
func (p *SiloProcess) WaitReady(ctx context.Context) error {
	for {
		if ok, _ := httpOK(ctx, "http://"+p.AdminAddress()+"/readyz"); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("silo %s not ready: %w", p.AdminAddress(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
