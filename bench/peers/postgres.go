package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStartTimeout bounds a fresh cluster's start, from postgres started to a connection.
const pgStartTimeout = 60 * time.Second

// ensurePostgres returns the bin dir of the newest PostgreSQL server installed from Debian's
// packages, installing the postgresql package with apt-get (through sudo when not root) when
// there is none.
func ensurePostgres(ctx context.Context) (string, error) {
	if dir := findPostgres(); dir != "" {
		return dir, nil
	}
	fmt.Fprintln(os.Stderr, "peers: no PostgreSQL server (/usr/lib/postgresql/*/bin/initdb): installing Debian's postgresql with apt-get")
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo"}
	}
	for _, args := range [][]string{
		{"apt-get", "update", "-qq"},
		{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "postgresql"},
	} {
		args = append(slices.Clone(sudo), args...)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %w\n%s", args, err, out)
		}
	}
	if dir := findPostgres(); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("apt-get installed postgresql, but there is still no /usr/lib/postgresql/*/bin/initdb")
}

// findPostgres returns the bin dir of the newest /usr/lib/postgresql/<version>, or "".
func findPostgres() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	best, bestVersion := "", -1.0
	for _, m := range matches {
		bin := filepath.Dir(m)
		version, err := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64)
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(bin, "postgres")); err == nil && version > bestVersion {
			best, bestVersion = bin, version
		}
	}
	return best
}

// pgProcess is a private PostgreSQL cluster: its postmaster, data dir and connection string.
type pgProcess struct {
	*server
	dir      string
	dsn      string
	settings string // server_version, synchronous_commit and fsync as the server reports them
}

// startPostgres makes a cluster in a temporary dir (initdb, trust authentication, which only
// loopback and the dir's socket reach), starts it on its defaults listening on 127.0.0.1 alone
// on a free port, with its unix socket in that dir, as the postgres OS user when the harness
// runs as root (PostgreSQL refuses root), and waits until it accepts a connection. The returned
// stop function stops it (fast shutdown) and removes its dir; it is also registered in reg.
func startPostgres(ctx context.Context, binDir string, reg *cleanups) (*pgProcess, func(), error) {
	dir, err := os.MkdirTemp("", "orrery-peers-pg-")
	if err != nil {
		return nil, nil, err
	}
	removeDir := reg.add(func() { os.RemoveAll(dir) })
	cred, err := postgresCredential()
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		removeDir()
		return nil, nil, err
	}
	data := filepath.Join(dir, "data")
	env := append(cleanEnv(), "LC_ALL=C")
	// --no-sync: initdb's own files need no fsync here; the server runs with fsync on.
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir, initdb.Env = dir, env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		removeDir()
		return nil, nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		removeDir()
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "synchronous_commit=on", "-c", "fsync=on")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	// SIGQUIT: should the harness die, the postmaster shuts down at once, its children with it.
	srv, err := startServer("postgres", cmd, filepath.Join(dir, "postgres.log"), syscall.SIGQUIT)
	if err != nil {
		removeDir()
		return nil, nil, err
	}
	p := &pgProcess{server: srv, dir: dir, dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	stop := reg.add(func() {
		p.stop(syscall.SIGINT, 20*time.Second) // SIGINT: fast shutdown
		removeDir()
	})
	fail := func(err error) (*pgProcess, func(), error) {
		stop()
		return nil, nil, err
	}
	deadline := time.Now().Add(pgStartTimeout)
	for {
		conn, err := pgx.Connect(ctx, p.dsn)
		if err == nil {
			var version, syncCommit, fsync string
			err = conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('synchronous_commit'), current_setting('fsync')").
				Scan(&version, &syncCommit, &fsync)
			conn.Close(ctx)
			if err != nil {
				return fail(err)
			}
			p.settings = fmt.Sprintf("PostgreSQL %s, synchronous_commit=%s, fsync=%s", version, syncCommit, fsync)
			return p, stop, nil
		}
		switch {
		case !p.running():
			return fail(p.exitError())
		case ctx.Err() != nil:
			return fail(ctx.Err())
		case time.Now().After(deadline):
			return fail(fmt.Errorf("postgres accepted no connection within %v (%v); the end of its log:\n%s", pgStartTimeout, err, logTail(p.logPath, 30)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postgresCredential is the postgres OS user's when the harness runs as root, nil otherwise.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as the postgres OS user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// pids is the postmaster and its descendants (backends, checkpointer, WAL writer,
// autovacuum...): their memory summed is the server memory of PostgreSQL.
func (p *pgProcess) pids() []int { return append([]int{p.pid()}, descendants(p.pid())...) }
