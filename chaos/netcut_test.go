package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netcutHelperEnv makes TestNetcutHelperProcess act as the process a netcut test isolates.
const netcutHelperEnv = "ORRERY_NETCUT_HELPER"

// TestNetcutHelperProcess is not a test: started by TestNetcutCutsOneProcess with
// ORRERY_NETCUT_HELPER=1, it echoes on a TCP and a UDP loopback port (printed on its first
// line, "listening tcp=ADDR udp=ADDR"), and answers each stdin line "tcp ADDR" or "udp ADDR"
// with "ok" or "fail: ..." on stdout after sending a byte to ADDR and waiting up to 1 s for its
// echo.
func TestNetcutHelperProcess(t *testing.T) {
	if os.Getenv(netcutHelperEnv) != "1" {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go echoTCP(l)
	go echoUDP(u)
	fmt.Printf("listening tcp=%s udp=%s\n", l.Addr(), u.LocalAddr())
	scan := bufio.NewScanner(os.Stdin)
	for scan.Scan() {
		proto, addr, _ := strings.Cut(scan.Text(), " ")
		if err := echoOnce(proto, addr); err != nil {
			fmt.Printf("fail: %v\n", err)
		} else {
			fmt.Println("ok")
		}
	}
	os.Exit(0)
}

// echoTCP echoes every connection l accepts.
func echoTCP(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() { _, _ = io.Copy(conn, conn); conn.Close() }()
	}
}

// echoUDP sends every datagram back.
func echoUDP(u net.PacketConn) {
	buf := make([]byte, 64)
	for {
		n, from, err := u.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = u.WriteTo(buf[:n], from)
	}
}

// echoOnce connects to addr over proto (tcp or udp), sends a byte and waits up to 1 s for it
// to come back.
func echoOnce(proto, addr string) error {
	conn, err := net.DialTimeout(proto, addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	return roundTrip(conn, time.Second)
}

// roundTrip sends a byte on conn and waits up to within for it to come back.
func roundTrip(conn net.Conn, within time.Duration) error {
	_ = conn.SetDeadline(time.Now().Add(within))
	if _, err := conn.Write([]byte{'x'}); err != nil {
		return err
	}
	buf := make([]byte, 1)
	_, err := io.ReadFull(conn, buf)
	return err
}

// TestNetcutCutsOneProcess: a process started in a netcut's cgroup echoes on TCP and UDP and
// reaches the test's echo servers both ways. Isolated, it is reached over neither protocol,
// reaches neither, and a TCP connection established before the cut carries nothing, while the
// test process still reaches its own servers; healed, all of it works again, the established
// connection included. When the test ends, the nft table, the cgroup and the bind mount are
// gone.
func TestNetcutCutsOneProcess(t *testing.T) {
	RequireNetcut(t)
	var n *netcut
	t.Run("cut", func(t *testing.T) { n = testNetcut(t) })
	if n == nil {
		return
	}
	if out, err := nft("list", "tables"); err != nil || strings.Contains(string(out), n.table) {
		t.Errorf("after the test, nft list tables (%v) still lists %s:\n%s", err, n.table, out)
	}
	for _, dir := range []string{n.dir, n.bind} {
		if _, err := os.Stat(dir); dir != "" && !os.IsNotExist(err) {
			t.Errorf("after the test, %s still exists (%v)", dir, err)
		}
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), n.name) {
		t.Errorf("after the test, a mount of %s is left", n.name)
	}
}

func testNetcut(t *testing.T) *netcut {
	n := newNetcut(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestNetcutHelperProcess$")
	cmd.Env = append(os.Environ(), netcutHelperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dir, err := n.startIn(cmd.SysProcAttr)
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dir.Close()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("the helper printed nothing: %v", lines.Err())
	}
	var helperTCP, helperUDP string
	if _, err := fmt.Sscanf(lines.Text(), "listening tcp=%s udp=%s", &helperTCP, &helperUDP); err != nil {
		t.Fatalf("the helper's first line %q: %v", lines.Text(), err)
	}
	procs, _ := os.ReadFile(n.dir + "/cgroup.procs")
	if !strings.Contains(" "+strings.Join(strings.Fields(string(procs)), " ")+" ", fmt.Sprintf(" %d ", cmd.Process.Pid)) {
		t.Fatalf("the helper (pid %d) is not in cgroup %s (cgroup.procs %q)", cmd.Process.Pid, n.dir, procs)
	}

	// The test's own echo servers, outside the cgroup.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	go echoTCP(l)
	go echoUDP(u)

	established, err := net.Dial("tcp", helperTCP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { established.Close() })
	helperOut := func(proto, addr string) error {
		if _, err := fmt.Fprintf(stdin, "%s %s\n", proto, addr); err != nil {
			return err
		}
		if !lines.Scan() {
			return fmt.Errorf("the helper stopped: %v", lines.Err())
		}
		if answer := lines.Text(); answer != "ok" {
			return fmt.Errorf("%s", answer)
		}
		return nil
	}
	paths := []struct {
		name  string
		reach func() error
		cut   bool // whether the isolation cuts it
	}{
		{"test → process, tcp", func() error { return echoOnce("tcp", helperTCP) }, true},
		{"test → process, udp", func() error { return echoOnce("udp", helperUDP) }, true},
		{"process → test, tcp", func() error { return helperOut("tcp", l.Addr().String()) }, true},
		{"process → test, udp", func() error { return helperOut("udp", u.LocalAddr().String()) }, true},
		{"an established tcp connection", func() error { return roundTrip(established, time.Second) }, true},
		{"test → test, tcp (a bystander)", func() error { return echoOnce("tcp", l.Addr().String()) }, false},
		{"test → test, udp (a bystander)", func() error { return echoOnce("udp", u.LocalAddr().String()) }, false},
	}
	check := func(phase string, isolated bool) {
		t.Helper()
		for _, p := range paths {
			err := p.reach()
			switch {
			case isolated && p.cut && err == nil:
				t.Errorf("%s: %s got through", phase, p.name)
			case (!isolated || !p.cut) && err != nil:
				t.Errorf("%s: %s: %v", phase, p.name, err)
			case isolated && p.cut:
				t.Logf("%s: %s: %v", phase, p.name, err)
			}
		}
	}
	check("before the cut", false)
	if err := n.isolate(); err != nil {
		t.Fatal(err)
	}
	check("isolated", true)
	// The byte written on the established connection while isolated waits in its send queue;
	// after the heal TCP retransmits it, and its echo comes back.
	if err := n.heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	_ = established.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(established, buf); err != nil {
		t.Errorf("healed: the byte sent while isolated on the established connection: %v", err)
	} else {
		t.Logf("healed: the byte sent while isolated was echoed %v after the heal", time.Since(healed).Round(time.Millisecond))
	}
	check("healed", false)
	// Isolated twice in a row, the table has its rules once.
	want, err := nft("list", "table", "inet", n.table)
	if err == nil {
		t.Fatalf("healed, nft still lists table %s:\n%s", n.table, want)
	}
	for range 2 {
		if err := n.isolate(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := nft("list", "table", "inet", n.table); err != nil {
		t.Errorf("isolated twice: nft list table: %v: %s", err, out)
	} else if rules := strings.Count(string(out), " drop\n") + strings.Count(string(out), " accept\n"); rules != 4 {
		t.Errorf("isolated twice: the table has %d rules, want 4:\n%s", rules, out)
	}
	return n // isolated: the cleanup deletes the table
}

// TestIsolatableSiloKeepsItsCgroupAcrossRestarts: each process of an Isolatable silo, the
// first and the one Cluster.Restart starts, runs in the silo's one cgroup; isolated, its admin
// endpoint does not answer; healed, it answers again.
func TestIsolatableSiloKeepsItsCgroupAcrossRestarts(t *testing.T) {
	RequireNetcut(t)
	cl := StartCluster(t, 1, SiloSpec{Partitions: 2, Isolatable: true})
	cut := cl.Specs[0].cut
	if cut == nil || cl.Silos[0].Spec.cut != cut {
		t.Fatal("an Isolatable silo's spec has no cgroup, or its process another")
	}
	healthz := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if ok, err := httpOK(ctx, "http://"+cl.Silos[0].AdminAddress()+"/healthz"); !ok {
			return fmt.Errorf("/healthz: %v", err)
		}
		return nil
	}
	for run := range 2 {
		p := cl.Silos[0]
		procs, err := os.ReadFile(cut.dir + "/cgroup.procs")
		if err != nil || !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(p.PID())) {
			t.Fatalf("run %d: the silo (pid %d) is not in cgroup %s (cgroup.procs %q, %v)", run+1, p.PID(), cut.dir, procs, err)
		}
		if err := healthz(); err != nil {
			t.Fatalf("run %d, before the cut: %v", run+1, err)
		}
		if err := p.Isolate(); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if !p.Isolated() || slices.Contains(cl.Serving(), 0) {
			t.Errorf("run %d: isolated, the silo says Isolated() %v and Serving() lists %v", run+1, p.Isolated(), cl.Serving())
		}
		if err := healthz(); err == nil {
			t.Errorf("run %d: isolated, the silo's /healthz answered", run+1)
		}
		if err := p.Heal(); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if err := healthz(); err != nil {
			t.Errorf("run %d, healed: %v", run+1, err)
		}
		if run == 0 {
			p.Kill()
			cl.Restart(t, 0)
		}
	}
}
