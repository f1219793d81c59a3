package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A data folder that exists but cannot be written is reported as a
// permission problem, naming it. The server runs as a child process, as
// the nobody user when the test runs as root (for whom no mode bit
// forbids writing).
func TestServerUnwritableData(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "spool-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test binary, where another user may run it.
	bin := filepath.Join(base, "spool")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o555); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "server", "--addr", "127.0.0.1:0", "--data", data)
	cmd.Env = append(os.Environ(), asSpoolEnv+"=1")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	exit, _ := err.(*exec.ExitError)
	if exit == nil || exit.ExitCode() != 1 {
		t.Fatalf("server on an unwritable folder: %v: %s", err, out)
	}
	want := "spool server: data folder " + data + " is not writable: permission denied"
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("server on an unwritable folder said %q, want it to start %q", out, want)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
