package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged starts a server for cfg whose logs, at debug level, go to
// the returned buffer.
func startLogged(t *testing.T, cfg config.Config) (*Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return srv, logs
}

func send(t *testing.T, method, url, body, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// Tokens from --auth-file and SPOOL_AUTH_TOKENS both work, and neither
// secret reaches the logs or a formatted Config.
func TestAuthFromFlagsFileAndEnv(t *testing.T) {
	t.Parallel()
	const fileSecret, envSecret = "file-admin-secret-0123456789", "env-reader-secret-0123456789"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# ops\nops admin * "+fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SPOOL_AUTH_TOKENS": "dash read-only * " + envSecret}
	cfg, err := config.Load([]string{"--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--auth", "--auth-file", tokens},
		func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Auth || cfg.AuthFile != tokens {
		t.Fatalf("config: auth %v, file %q", cfg.Auth, cfg.AuthFile)
	}
	asJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, asJSON); strings.Contains(s, envSecret) {
		t.Errorf("a formatted Config shows the secret of SPOOL_AUTH_TOKENS")
	}
	if cfg.AuthTokens == "" {
		t.Fatal("SPOOL_AUTH_TOKENS was not read")
	}
	srv, logs := startLogged(t, cfg)
	base := "http://" + srv.Addr()
	resp := send(t, "POST", base+"/v1/jobs", `{"kind":"k"}`, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("enqueue without a token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for _, c := range []struct {
		method, path, body, token string
		want                      int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"GET", "/v1/openapi.json", "", "", 200},
		{"POST", "/v1/jobs", `{"kind":"k"}`, fileSecret, 201},
		{"POST", "/v1/jobs", `{"kind":"k"}`, envSecret, 403},
		{"GET", "/v1/queues", "", envSecret, 200},
		{"GET", "/v1/queues", "", envSecret + "x", 401},
	} {
		if resp := send(t, c.method, base+c.path, c.body, c.token); resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
	if !strings.Contains(logs.String(), "auth on") {
		t.Errorf("start-up did not log that auth is on:\n%s", logs)
	}
	for _, secret := range []string{fileSecret, envSecret} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs hold a secret:\n%s", logs)
		}
	}
}

// --auth without tokens, or with a broken token list, refuses to start,
// and the error does not quote a secret.
func TestAuthRefusesToStartWithoutTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noEnv := func(string) string { return "" }
	if _, err := config.Load([]string{"--auth", "--data", dir}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "auth") {
		t.Fatalf("--auth without tokens: %v, want a config error", err)
	}
	const secret = "0123456789abcdef0123456789"
	for name, content := range map[string]string{
		"empty":    "# nobody yet\n",
		"badrole":  "ops boss * " + secret + "\n",
		"badfield": "ops admin " + secret + "\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.Addr = "127.0.0.1:0"
		cfg.Data = filepath.Join(dir, name+"-data")
		cfg.Auth = true
		cfg.AuthFile = path
		srv := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		err := srv.Start(context.Background())
		if err == nil {
			_ = srv.Stop(context.Background())
			t.Errorf("%s token file: the server started", name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s token file: the error quotes the secret: %v", name, err)
		}
	}
}

// Without auth, a server reachable from other hosts says so loudly at
// start; on loopback, or with auth, it does not.
func TestWarnsWhenOpenToTheNetwork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr string
		auth bool
		warn bool
	}{
		{"0.0.0.0:0", false, true},
		{"0.0.0.0:0", true, false},
		{"127.0.0.1:0", false, false},
	} {
		cfg := config.Default()
		cfg.Addr = c.addr
		cfg.Data = t.TempDir()
		if c.auth {
			cfg.Auth = true
			cfg.AuthTokens = "ops admin * 0123456789abcdef0123"
		}
		_, logs := startLogged(t, cfg)
		if got := strings.Contains(logs.String(), "AUTH IS OFF"); got != c.warn {
			t.Errorf("addr %s auth %v: warned %v, want %v:\n%s", c.addr, c.auth, got, c.warn, logs)
		}
	}
}
