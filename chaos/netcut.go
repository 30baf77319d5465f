package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A netcut cuts all of one process's network traffic at the kernel, loopback included: the
// process is started inside a cgroup v2 of its own (SysProcAttr.UseCgroupFD), so every socket it
// creates, and every connection its listeners accept, belongs to that cgroup; isolating it adds
// an nftables table that drops every packet a socket of that cgroup sends and every packet
// addressed to one ("socket cgroupv2"), TCP and UDP, silently as a cut network would (see
// netcutMark); healing deletes the table. Other processes' traffic is untouched.
//
// nft resolves the cgroup's path relative to /sys/fs/cgroup. Where cgroup v2 is mounted
// elsewhere (the hybrid layout, /sys/fs/cgroup/unified), the cgroup directory is bind-mounted
// onto /sys/fs/cgroup/<name> so that the path resolves to the same inode (the cgroup id).

// NetcutRequiredEnv, set to 1 (make test-cluster and make cluster-test set it), makes the tests
// that isolate a silo fail, instead of skip, on a machine that cannot: not root, no cgroup v2,
// no nft (make chaos-deps installs it) or no nftables socket match in the kernel.
const NetcutRequiredEnv = "ORRERY_NETCUT_REQUIRED"

// netcutPrefix names the cgroups (orrery-chaos-<test pid>-<n>) and, with underscores, the nft
// tables (inet orrery_chaos_<test pid>_<n>) of netcuts.
const netcutPrefix = "orrery-chaos-"

// nftCgroupRoot is where nft looks up a "socket cgroupv2" path.
const nftCgroupRoot = "/sys/fs/cgroup"

// RequireNetcut skips the test, or fails it under ORRERY_NETCUT_REQUIRED=1, unless this machine
// can isolate a silo (SiloSpec.Isolatable): the message says what is missing. The first call
// also removes what an earlier test binary that died without its cleanups (a -timeout panic, a
// SIGKILL) left behind: nft tables, bind mounts and empty cgroups of netcuts whose process is
// gone.
func RequireNetcut(t TB) {
	t.Helper()
	err := NetcutAvailable()
	if err == nil {
		return
	}
	if os.Getenv(NetcutRequiredEnv) == "1" {
		t.Fatalf("%s=1 and this machine cannot isolate a silo: %v", NetcutRequiredEnv, err)
	}
	t.Skipf("this machine cannot isolate a silo (%s=1 makes this a failure): %v", NetcutRequiredEnv, err)
}

// NetcutAvailable is nil when this machine can isolate a silo (SiloSpec.Isolatable), and
// otherwise says what is missing: what RequireNetcut checks, for a caller that is not a test.
// The first call probes (and sweeps what dead runs left behind, as RequireNetcut does); later
// calls return its answer.
func NetcutAvailable() error {
	netcutOnce.Do(func() { netcutMount, netcutErr = probeNetcut() })
	return netcutErr
}

var (
	netcutOnce  sync.Once
	netcutMount cgroup2Mount
	netcutErr   error
	netcutSeq   atomic.Int64
)

// cgroup2Mount is where the cgroup v2 hierarchy is mounted.
type cgroup2Mount struct {
	// dir is the mount point.
	dir string
	// depth is the level of dir's cgroup in the hierarchy (0 when the mount shows its root).
	depth int
}

// netcut is one process's cgroup and the nft table that isolates it. A spec's netcut survives
// the restarts of its silo: the restarted process is started in the same cgroup, isolated if
// the cgroup is.
type netcut struct {
	name  string // the cgroup directory's name, orrery-chaos-<test pid>-<n>
	dir   string // the cgroup directory under the cgroup v2 mount
	bind  string // /sys/fs/cgroup/<name> bind-mounted onto dir, "" when dir is that path already
	table string // the nft table, family inet: orrery_chaos_<test pid>_<n>
	level int    // the cgroup's level in the hierarchy (nft's "level")

	mu       sync.Mutex
	isolated bool
}

// newNetcut creates a cgroup for one silo process (skipping or failing the test as
// RequireNetcut does when the machine cannot isolate) and removes it, its bind mount and its
// nft table when the test ends, after the processes the test started later are gone.
func newNetcut(t TB) *netcut {
	t.Helper()
	RequireNetcut(t)
	n, err := createNetcut(netcutMount)
	if err != nil {
		t.Fatalf("netcut: %v", err)
	}
	t.Cleanup(func() {
		if err := n.remove(); err != nil {
			t.Errorf("netcut cleanup: %v", err)
		}
	})
	return n
}

// createNetcut creates the cgroup directory under mount and, when nft cannot find it under
// /sys/fs/cgroup, bind-mounts it there.
func createNetcut(mount cgroup2Mount) (*netcut, error) {
	seq := netcutSeq.Add(1)
	n := &netcut{
		name:  fmt.Sprintf("%s%d-%d", netcutPrefix, os.Getpid(), seq),
		table: fmt.Sprintf("orrery_chaos_%d_%d", os.Getpid(), seq),
		level: mount.depth + 1,
	}
	n.dir = filepath.Join(mount.dir, n.name)
	if err := os.Mkdir(n.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if filepath.Clean(mount.dir) != nftCgroupRoot {
		n.bind = filepath.Join(nftCgroupRoot, n.name)
		if err := os.Mkdir(n.bind, 0o755); err != nil {
			_ = os.Remove(n.dir)
			return nil, fmt.Errorf("create the bind mount point for nft: %w", err)
		}
		if err := syscall.Mount(n.dir, n.bind, "", syscall.MS_BIND, ""); err != nil {
			_ = os.Remove(n.bind)
			_ = os.Remove(n.dir)
			return nil, fmt.Errorf("bind-mount %s on %s: %w", n.dir, n.bind, err)
		}
	}
	return n, nil
}

// startIn sets attr so that the process is started in the cgroup, from birth, so that its every
// socket belongs to it. The caller closes the returned directory once the process started.
func (n *netcut) startIn(attr *syscall.SysProcAttr) (*os.File, error) {
	f, err := os.Open(n.dir)
	if err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	attr.UseCgroupFD, attr.CgroupFD = true, int(f.Fd())
	return f, nil
}

// netcutMark marks, in the output chain, the loopback packets an isolated process sends, so
// that the input chain drops them. Dropping them in the output chain instead would fail the
// process's sends at once (sendto returns EPERM for a UDP datagram dropped there), where a cut
// network loses them silently; marked and dropped on input, they leave as usual and are lost.
const netcutMark = 0x0c4a0575

// ruleset is the nft script that isolates the cgroup: in the output chain, a packet of one of
// its sockets is marked when it goes out on loopback and dropped otherwise; in the input chain,
// a marked packet, or one addressed to one of its sockets, is dropped. The table is added and
// deleted first, so that the script replaces a table left from before instead of adding rules
// to it.
func (n *netcut) ruleset() string {
	match := fmt.Sprintf("socket cgroupv2 level %d %q", n.level, n.name)
	return fmt.Sprintf(`add table inet %[1]s
delete table inet %[1]s
table inet %[1]s {
	chain output {
		type filter hook output priority 0; policy accept;
		%[2]s oif "lo" meta mark set %#[3]x accept
		%[2]s drop
	}
	chain input {
		type filter hook input priority 0; policy accept;
		meta mark %#[3]x drop
		%[2]s drop
	}
}
`, n.table, match, netcutMark)
}

// isolate installs the table: from here every packet a socket of the cgroup sends, or that is
// addressed to one, is dropped.
func (n *netcut) isolate() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := nftScript(n.ruleset()); err != nil {
		return fmt.Errorf("isolate cgroup %s: %w", n.name, err)
	}
	n.isolated = true
	return nil
}

// heal deletes the table (if there is one).
func (n *netcut) heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := deleteTable(n.table); err != nil {
		return fmt.Errorf("heal cgroup %s: %w", n.name, err)
	}
	n.isolated = false
	return nil
}

// isIsolated reports whether isolate was the last of isolate and heal.
func (n *netcut) isIsolated() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isolated
}

// remove deletes the table, unmounts and removes the bind mount, and removes the cgroup,
// waiting up to 10 s for its processes to be gone.
func (n *netcut) remove() error {
	var errs []error
	if err := n.heal(); err != nil {
		errs = append(errs, err)
	}
	if n.bind != "" {
		if err := syscall.Unmount(n.bind, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", n.bind, err))
		} else if err := os.Remove(n.bind); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.Remove(n.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			break
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			procs, _ := os.ReadFile(filepath.Join(n.dir, "cgroup.procs"))
			errs = append(errs, fmt.Errorf("remove cgroup %s (processes still in it: %q): %w", n.dir, strings.Fields(string(procs)), err))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// Isolate cuts all of the silo's network traffic on loopback, its actor (gRPC), gossip
// (memberlist UDP and TCP) and admin traffic, incoming and outgoing, established connections
// included (their packets are dropped, not refused: TCP retransmits them after Heal). The
// process keeps running and is not told. The spec must be Isolatable. The silo is left out of
// Cluster.Serving until Heal; a restart of the silo while it is isolated starts it isolated.
// Isolate checks that a TCP connection to the admin port no longer gets through.
func (p *SiloProcess) Isolate() error {
	n := p.Spec.cut
	if n == nil {
		return fmt.Errorf("silo %s: Isolate needs SiloSpec.Isolatable", p.GossipAddress())
	}
	if err := n.isolate(); err != nil {
		return err
	}
	// A SYN to the admin listener must now be dropped: a connection that gets through says the
	// rule matched nothing (for instance a cgroup level that is not the one nft was given).
	if conn, err := net.DialTimeout("tcp", p.AdminAddress(), 500*time.Millisecond); err == nil {
		conn.Close()
		healErr := n.heal()
		return errors.Join(fmt.Errorf("silo %s: isolated, yet a connection to its admin port %s got through (nft rule %q)",
			p.GossipAddress(), p.AdminAddress(), n.ruleset()), healErr)
	}
	return nil
}

// Heal undoes Isolate: the silo's traffic flows again. Healing a silo that is not isolated does
// nothing.
func (p *SiloProcess) Heal() error {
	if p.Spec.cut == nil {
		return fmt.Errorf("silo %s: Heal needs SiloSpec.Isolatable", p.GossipAddress())
	}
	return p.Spec.cut.heal()
}

// Isolated reports whether Isolate was the last of Isolate and Heal for the silo's cgroup.
func (p *SiloProcess) Isolated() bool { return p.Spec.cut != nil && p.Spec.cut.isIsolated() }

// probeNetcut checks that this machine can isolate a process: root, a cgroup v2 mount, nft, a
// process started into a cgroup, and the kernel's acceptance of the rules. It first sweeps what
// dead test binaries left behind.
func probeNetcut() (cgroup2Mount, error) {
	if uid := os.Geteuid(); uid != 0 {
		return cgroup2Mount{}, fmt.Errorf("not root (uid %d): creating cgroups, bind-mounting them and changing nftables rules need root", uid)
	}
	mount, err := findCgroup2()
	if err != nil {
		return cgroup2Mount{}, err
	}
	if _, err := nftPath(); err != nil {
		return cgroup2Mount{}, err
	}
	if out, err := nft("list", "tables"); err != nil {
		return cgroup2Mount{}, fmt.Errorf("nft list tables: %v: %s", err, out)
	}
	sweepNetcuts(mount)
	n, err := createNetcut(mount)
	if err != nil {
		return cgroup2Mount{}, fmt.Errorf("netcut probe: %w", err)
	}
	probeErr := func() error {
		trueBin, err := exec.LookPath("true")
		if err != nil {
			return err
		}
		cmd := exec.Command(trueBin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		f, err := n.startIn(cmd.SysProcAttr)
		if err != nil {
			return err
		}
		defer f.Close()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("start a process in cgroup %s (clone3 CLONE_INTO_CGROUP): %v: %s", n.dir, err, out)
		}
		if err := n.isolate(); err != nil {
			return fmt.Errorf("%w (does the kernel have nft_socket?)", err)
		}
		return n.heal()
	}()
	if err := errors.Join(probeErr, n.remove()); err != nil {
		return cgroup2Mount{}, fmt.Errorf("netcut probe: %w", err)
	}
	return mount, nil
}

// findCgroup2 finds the cgroup v2 mount in /proc/self/mountinfo, /sys/fs/cgroup first.
func findCgroup2() (cgroup2Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroup2Mount{}, err
	}
	defer f.Close()
	var found []cgroup2Mount
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		// 40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		fields := strings.Fields(scan.Text())
		sep := -1
		for i, field := range fields {
			if field == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		root, dir := unescapeMountField(fields[3]), unescapeMountField(fields[4])
		depth := 0
		if root = strings.Trim(root, "/"); root != "" {
			depth = len(strings.Split(root, "/"))
		}
		found = append(found, cgroup2Mount{dir: dir, depth: depth})
	}
	if err := scan.Err(); err != nil {
		return cgroup2Mount{}, err
	}
	for _, m := range found {
		if m.dir == nftCgroupRoot {
			return m, nil
		}
	}
	if len(found) == 0 {
		return cgroup2Mount{}, errors.New("no cgroup v2 hierarchy is mounted (/proc/self/mountinfo lists no cgroup2)")
	}
	if _, err := os.Stat(nftCgroupRoot); err != nil {
		return cgroup2Mount{}, fmt.Errorf("cgroup v2 is mounted at %s, and nft resolves cgroup paths under %s, which is missing: %w", found[0].dir, nftCgroupRoot, err)
	}
	return found[0], nil
}

// unescapeMountField undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sweepNetcuts removes what netcuts of test binaries that are no longer running left behind:
// their nft tables, their bind mounts under /sys/fs/cgroup, and their cgroups when empty (a
// cgroup still holding a process is left alone).
func sweepNetcuts(mount cgroup2Mount) {
	if out, err := nft("list", "tables"); err == nil {
		for line := range strings.Lines(string(out)) {
			fields := strings.Fields(line)
			if len(fields) == 3 && fields[0] == "table" && fields[1] == "inet" && staleNetcut(strings.ReplaceAll(fields[2], "_", "-")) {
				_ = deleteTable(fields[2])
			}
		}
	}
	if mount.dir != nftCgroupRoot {
		entries, _ := os.ReadDir(nftCgroupRoot)
		for _, e := range entries {
			if staleNetcut(e.Name()) {
				bind := filepath.Join(nftCgroupRoot, e.Name())
				_ = syscall.Unmount(bind, syscall.MNT_DETACH)
				_ = os.Remove(bind)
			}
		}
	}
	entries, _ := os.ReadDir(mount.dir)
	for _, e := range entries {
		if staleNetcut(e.Name()) {
			_ = os.Remove(filepath.Join(mount.dir, e.Name())) // fails, harmlessly, unless empty
		}
	}
}

// staleNetcut reports whether name is orrery-chaos-<pid>-<n> of a process that no longer runs.
func staleNetcut(name string) bool {
	rest, ok := strings.CutPrefix(name, netcutPrefix)
	if !ok {
		return false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// deleteTable deletes the inet table name; a missing table is no error.
func deleteTable(name string) error {
	return nftScript(fmt.Sprintf("add table inet %[1]s\ndelete table inet %[1]s\n", name))
}

// nftScript runs script with nft -f, in one transaction.
func nftScript(script string) error {
	path, err := nftPath()
	if err != nil {
		return err
	}
	cmd := exec.Command(path, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %v: %s\nscript:\n%s", err, strings.TrimSpace(string(out)), script)
	}
	return nil
}

// nft runs nft with args and returns its combined output.
func nft(args ...string) ([]byte, error) {
	path, err := nftPath()
	if err != nil {
		return nil, err
	}
	return exec.Command(path, args...).CombinedOutput()
}

// nftPath finds nft on PATH or in the sbin directories, which a non-login PATH may lack.
func nftPath() (string, error) {
	if path, err := exec.LookPath("nft"); err == nil {
		return path, nil
	}
	for _, path := range []string{"/usr/sbin/nft", "/sbin/nft"} {
		if info, err := os.Stat(path); err == nil && info.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", errors.New("nft not found (Debian's nftables package; make chaos-deps installs it)")
}
