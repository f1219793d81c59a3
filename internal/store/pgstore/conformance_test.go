package pgstore

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on url with its Close registered with tb.
func open(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), Config{URL: url, Migrate: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// harness opens stores on fresh schemas of the test binary's PostgreSQL.
func harness() storetest.Harness {
	return storetest.Harness{
		Open: func(tb testing.TB) store.Store { return open(tb, pgtest.Schema(tb)) },
		Reopen: func(tb testing.TB, s store.Store) store.Store {
			tb.Helper()
			old := s.(*Store)
			if err := old.Close(); err != nil {
				tb.Fatalf("close store: %v", err)
			}
			return open(tb, old.cfg.URL)
		},
		Node:         func(tb testing.TB, s store.Store) store.Store { return open(tb, s.(*Store).cfg.URL) },
		Capabilities: store.Capabilities{MultiNode: true, ListenNotify: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness())
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, harness())
}
