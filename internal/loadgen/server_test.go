package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as a stand-in for `spool server`: it
// answers /readyz on --addr and exits 0 on SIGTERM, or, with the value
// "exit", exits with status 3 before it is ready.
const childEnv = "LOADGEN_TEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "serve":
		os.Exit(serveForTest(os.Args[1:]))
	case "exit":
		fmt.Fprintln(os.Stderr, "test server: refusing to start")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// serveForTest answers /readyz on the --addr of args until SIGTERM.
func serveForTest(args []string) int {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "", "")
	fs.String("data", "", "")
	fs.String("log-level", "", "")
	if len(args) == 0 || args[0] != "server" || fs.Parse(args[1:]) != nil {
		return 2
	}
	// The signal is caught before the stand-in answers /readyz: a SIGTERM
	// sent as soon as it is ready must find the handler there.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
	go srv.Serve(ln)
	defer stop()
	<-ctx.Done()
	_ = srv.Close()
	return 0
}

// testCommand runs the test binary as the stand-in server, in mode.
func testCommand(mode string) Command {
	return func(args []string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"="+mode)
		return cmd, nil
	}
}

func TestServerStartsAndRestartsInPlace(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no graceful signal")
	}
	ctx := context.Background()
	s, err := NewServer(testCommand("serve"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Start(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := s.Ready(ctx); got != http.StatusOK {
		t.Fatalf("/readyz %d", got)
	}
	if _, err := s.Start(ctx, time.Second); err == nil {
		t.Fatal("a second start of a running server was not refused")
	}
	addr, first := s.Addr, s.Process().Pid()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Process().Alive() || s.Ready(ctx) != 0 {
		t.Fatal("killed server still answers")
	}
	if _, err := s.Start(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.Addr != addr || s.Process().Pid() == first {
		t.Fatalf("restart at %s pid %d, want %s and a new pid", s.Addr, s.Process().Pid(), addr)
	}
	if err := s.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if s.Process().Alive() {
		t.Fatal("terminated server still runs")
	}
	if u, err := s.Process().Usage(); err == nil {
		t.Fatalf("usage of an exited process: %+v", u)
	}
}

func TestServerThatExitsEarly(t *testing.T) {
	t.Parallel()
	s, err := NewServer(testCommand("exit"), filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Start(context.Background(), 30*time.Second)
	if !errors.Is(err, ErrExitedEarly) {
		t.Fatalf("err %v, want ErrExitedEarly", err)
	}
	if n := strings.Count(err.Error(), "refusing to start"); n != firstStartAttempts {
		t.Fatalf("%d attempts in %q, want %d", n, err, firstStartAttempts)
	}
}

func TestServerNotReadyInTime(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command")
	}
	silent := func([]string) (*exec.Cmd, error) { return exec.Command("sleep", "30"), nil }
	s, err := NewServer(silent, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Start(context.Background(), 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready within") {
		t.Fatalf("err %v", err)
	}
	if s.Process().Alive() {
		t.Fatal("a server not ready in time was left running")
	}
}
