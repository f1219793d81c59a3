package sqlitestore

import (
	"context"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/storetest"
)

// harness opens stores on fresh folders of real SQLite files, each with
// its Config changed by change.
func harness(change ...func(*Config)) storetest.Harness {
	return storetest.Harness{
		Open: func(tb testing.TB) store.Store { return setup(tb, change...).s },
		Reopen: func(tb testing.TB, s store.Store) store.Store {
			tb.Helper()
			old := s.(*Store)
			if err := old.Close(); err != nil {
				tb.Fatalf("close store: %v", err)
			}
			b := &bundle{t: tb, dir: old.cfg.Dir, ctx: context.Background()}
			b.open(change...)
			tb.Cleanup(func() { _ = b.s.Close() })
			return b.s
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness())
}

// The smallest ready window makes every claim of more than a few jobs
// refill from the database, so the suite checks the refill paths too.
func TestConformanceSmallWindow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(func(c *Config) { c.ReadyWindow = minReadyWindow }))
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, harness())
}

// BenchmarkStoreSyncNormal measures the faster durability level, which
// may lose the last commits on power loss.
func BenchmarkStoreSyncNormal(b *testing.B) {
	storetest.Bench(b, harness(func(c *Config) { c.Sync = "normal" }))
}

// The memory store keeps memory-durability jobs on a memory folder and
// passes the same suite.
func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	h := harness(func(c *Config) { c.Memory = true })
	h.Durabilities = []job.Durability{job.DurabilityMemory}
	h.Reopen = nil // a restart empties it by design
	storetest.Run(t, h)
}
