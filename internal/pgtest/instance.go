// Package pgtest runs a real PostgreSQL server for tests: it finds the
// server's binaries, initialises a cluster in a temporary folder, starts it on
// a free loopback port with fsync on, hands each test a fresh schema, and
// stops the server it started when the test binary ends. There are no mocks
// and no containers. A test that needs PostgreSQL skips when no PostgreSQL is
// installed, or fails when every test is required (SPOOL_TEST_REQUIRE_ALL=1,
// set by scripts/test; see internal/testenv); one that finds PostgreSQL fails
// when it cannot start it.
//
// PostgreSQL refuses to run as root, so when the tests run as root the server
// runs as an unprivileged user (postgres when it exists, else nobody) that owns
// the cluster's folder.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// superuser is the role initdb creates; the cluster trusts local loopback
// connections, which is fine for a throwaway test server.
const superuser = "spool"

// startTimeout bounds how long a start waits for the server to answer.
const startTimeout = 60 * time.Second

// Instance is one PostgreSQL server started by this process.
type Instance struct {
	bin  string // folder of initdb, postgres and pg_ctl
	root string // temporary folder holding the cluster and its log
	data string
	log  string
	port int
	cred *syscall.Credential // nil when not running as root
	cmd  *exec.Cmd
	exit chan error
}

// Start initialises a fresh cluster in a new temporary folder and starts
// it on a free 127.0.0.1 port. Stop (or Remove) releases it.
func Start() (*Instance, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(clusterParent(), "spool-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create cluster folder: %w", err)
	}
	in := &Instance{bin: bin, root: root, data: filepath.Join(root, "data"), log: filepath.Join(root, "postgres.log")}
	if err := in.init(); err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	var startErr error
	for range 3 { // a free port can be taken between the probe and the start
		if in.port, err = freePort(); err != nil {
			_ = os.RemoveAll(root)
			return nil, err
		}
		if startErr = in.StartServer(); startErr == nil {
			return in, nil
		}
	}
	_ = os.RemoveAll(root)
	return nil, startErr
}

// BinEnv names the environment variable that, when set, is the one folder
// FindBin looks in for the PostgreSQL server binaries.
const BinEnv = "SPOOL_PG_BIN"

// FindBin returns the folder of the PostgreSQL server binaries: BinEnv
// when set, else that of initdb on PATH, else the newest
// /usr/lib/postgresql/*/bin (Debian, Ubuntu), else other usual places.
func FindBin() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
				return "", fmt.Errorf("find PostgreSQL: no %s in %s=%s", name, BinEnv, dir)
			}
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	var found []string
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin/initdb", "/usr/pgsql-*/bin/initdb", "/usr/local/pgsql/bin/initdb"} {
		m, _ := filepath.Glob(pattern)
		found = append(found, m...)
	}
	if len(found) == 0 {
		return "", errors.New("find PostgreSQL: no initdb on PATH or under /usr/lib/postgresql; run scripts/install-postgres")
	}
	sort.Slice(found, func(i, k int) bool { return versionOf(found[i]) < versionOf(found[k]) })
	return filepath.Dir(found[len(found)-1]), nil
}

// clusterParent is the folder for cluster folders: the temporary folder,
// unless the tests run as root and other users cannot pass through it (a
// TMPDIR under /root, say), since the server then runs as another user.
func clusterParent() string {
	dir := os.TempDir()
	if os.Geteuid() != 0 {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// versionOf is the major version in a path like /usr/lib/postgresql/15/bin.
func versionOf(path string) int {
	for _, part := range strings.Split(path, string(filepath.Separator)) {
		if n, err := strconv.Atoi(strings.TrimPrefix(part, "pgsql-")); err == nil {
			return n
		}
	}
	return 0
}

// init runs initdb into in.data as the server's user.
func (in *Instance) init() error {
	if os.Geteuid() == 0 {
		cred, err := serverUser()
		if err != nil {
			return err
		}
		in.cred = cred
		// The user must reach the cluster folder and own it and the log.
		if err := os.Chmod(in.root, 0o755); err != nil {
			return fmt.Errorf("open cluster folder: %w", err)
		}
	}
	if err := os.Mkdir(in.data, 0o700); err != nil {
		return fmt.Errorf("create data folder: %w", err)
	}
	if err := os.WriteFile(in.log, nil, 0o600); err != nil {
		return fmt.Errorf("create log: %w", err)
	}
	if in.cred != nil {
		for _, p := range []string{in.data, in.log} {
			if err := os.Chown(p, int(in.cred.Uid), int(in.cred.Gid)); err != nil {
				return fmt.Errorf("hand %s to the server user: %w", p, err)
			}
		}
	}
	cmd := in.command("initdb", "-D", in.data, "-U", superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// serverUser is the unprivileged user the server runs as under root.
func serverUser() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
		}
	}
	return nil, errors.New("find a user to run PostgreSQL as: neither postgres nor nobody exists")
}

// command runs a PostgreSQL binary as the server's user, in the C locale.
func (in *Instance) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(in.bin, name), args...)
	cmd.Dir = in.root
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	return cmd
}

// StartServer starts the server of an initialised cluster (again, after
// StopServer) and waits until it answers.
func (in *Instance) StartServer() error {
	if in.cmd != nil {
		return errors.New("start PostgreSQL: already running")
	}
	logFile, err := os.OpenFile(in.log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logFile.Close()
	cmd := in.command("postgres", "-D", in.data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(in.port),
		"-c", "unix_socket_directories="+in.data,
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
		"-c", "log_min_messages=warning",
		"-c", "log_min_error_statement=panic",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server dies with the test binary even when the binary is killed.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	in.cmd = cmd
	in.exit = make(chan error, 1)
	go func() { in.exit <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, in.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case werr := <-in.exit:
			in.cmd = nil
			return fmt.Errorf("start PostgreSQL: server exited (%v); log:\n%s", werr, in.tail())
		case <-ctx.Done():
			_ = in.StopServer()
			return fmt.Errorf("start PostgreSQL: no answer within %v: %v; log:\n%s", startTimeout, err, in.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StopServer shuts the server down (fast mode: sessions are ended,
// committed data stays) and waits for it to exit. It signals only the
// process this Instance started.
func (in *Instance) StopServer() error {
	if in.cmd == nil {
		return nil
	}
	_ = in.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-in.exit:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Signal(syscall.SIGQUIT)
		<-in.exit
	}
	in.cmd = nil
	return nil
}

// Restart stops the server and starts it again on the same port and data.
func (in *Instance) Restart() error {
	if err := in.StopServer(); err != nil {
		return err
	}
	return in.StartServer()
}

// Remove stops the server and deletes its folder.
func (in *Instance) Remove() error {
	err := in.StopServer()
	if rerr := os.RemoveAll(in.root); rerr != nil && err == nil {
		err = fmt.Errorf("remove cluster folder: %w", rerr)
	}
	return err
}

// Port is the loopback port the server listens on.
func (in *Instance) Port() int { return in.port }

// URL is the connection URL of database db as the superuser.
func (in *Instance) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, in.port, db)
}

// tail is the end of the server's log, for error messages.
func (in *Instance) tail() string {
	data, _ := os.ReadFile(in.log)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
