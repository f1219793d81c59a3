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

// Shared returns the test binary's server, starting it on first use. It
// fails tb when PostgreSQL cannot start: tests that need it never skip.
// Packages that use it must call Main from TestMain so that the server is
// removed at the end.
func Shared(tb testing.TB) *Instance {
	tb.Helper()
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
