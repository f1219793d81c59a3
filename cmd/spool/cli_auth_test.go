package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// The client commands send --auth-token, or SPOOL_TOKEN when the flag is
// not given, to a server with auth on.
func TestCLIAuthToken(t *testing.T) {
	t.Parallel()
	const secret = "cli-admin-secret-0123456789"
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	cfg.Auth = true
	cfg.AuthTokens = "ops admin * " + secret
	srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	run := func(env map[string]string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		env["SPOOL_SERVER"] = "http://" + srv.Addr()
		c := &cli{out: &out, errOut: &errOut, getenv: func(k string) string { return env[k] }}
		code := c.run(args)
		return code, out.String() + errOut.String()
	}
	if code, out := run(map[string]string{}, "enqueue", "--kind", "k"); code != 1 || !strings.Contains(out, "unauthorized") {
		t.Fatalf("enqueue without a token: exit %d %q", code, out)
	}
	if code, out := run(map[string]string{}, "enqueue", "--kind", "k", "--auth-token", secret); code != 0 {
		t.Fatalf("enqueue with --auth-token: exit %d %q", code, out)
	}
	if code, out := run(map[string]string{"SPOOL_TOKEN": secret}, "queues", "list"); code != 0 || !strings.Contains(out, "default") {
		t.Fatalf("queues list with SPOOL_TOKEN: exit %d %q", code, out)
	}
	if code, out := run(map[string]string{"SPOOL_TOKEN": secret}, "enqueue", "--kind", "k", "--auth-token", "wrong-secret-0123456789"); code != 1 || strings.Contains(out, secret) {
		t.Fatalf("--auth-token over SPOOL_TOKEN: exit %d %q", code, out)
	}
}
