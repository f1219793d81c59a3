package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/testenv"
)

// shared is the one server of a test binary, started on first use.
var shared struct {
	once sync.Once
	in   *Instance
	err  error
	n    atomic.Int64
}

// Main runs the tests of a package (call it from TestMain), then runs
// cleanups and removes the shared server, if a test started it.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	if shared.in != nil {
		if err := shared.in.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// Need ends tb unless PostgreSQL is installed: it skips tb, or fails it
// when every test is required (testenv.RequireAll). It is the one place
// that decides whether a test over PostgreSQL runs.
func Need(tb testing.TB) {
	tb.Helper()
	if _, err := FindBin(); err != nil {
		testenv.Missing(tb, "PostgreSQL", err)
	}
}

// Shared returns the test binary's server, starting it on first use. It
// ends tb as Need does when PostgreSQL is not installed, and fails it when
// PostgreSQL is installed but cannot start. Packages that use it must call
// Main from TestMain so that the server is removed at the end.
func Shared(tb testing.TB) *Instance {
	tb.Helper()
	Need(tb)
	shared.once.Do(func() { shared.in, shared.err = Start() })
	if shared.err != nil {
		tb.Fatalf("pgtest: %v", shared.err)
	}
	return shared.in
}

// Schema creates a fresh, empty schema on the shared server and returns a
// connection URL whose sessions use it (search_path), so that each test
// has its own tables, notification channel and advisory locks.
func Schema(tb testing.TB) string {
	tb.Helper()
	in := Shared(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), shared.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, in.URL("postgres"))
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	return in.URL("postgres") + "&search_path=" + name
}

// Dedicated starts a server of tb's own, for a test that stops or restarts
// it, and removes it when tb ends. It ends tb as Need does when PostgreSQL
// is not installed, and fails it when PostgreSQL cannot start.
func Dedicated(tb testing.TB) *Instance {
	tb.Helper()
	Need(tb)
	in, err := Start()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := in.Remove(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return in
}
