package sqlitestore

import (
	"fmt"
	"log/slog"

	"github.com/spoolq/spool/internal/store"
)

// Defaults of Config.
const (
	// DefaultMaxBatchOps bounds the work of one group commit, in jobs or
	// items (see Config.MaxBatchOps). Measured on 2 cores, throughput is
	// flat from about 1000 jobs per commit up; the larger bound keeps it so
	// on disks with slower fsyncs, at a commit latency of tens of ms.
	DefaultMaxBatchOps = 4096
	// DefaultReadyWindow is the per-queue ready window size. It is at least
	// the largest fetch (1000) so that one refill serves a whole claim.
	DefaultReadyWindow = 2048
	// DefaultMaxActive bounds the jobs active at once (see
	// Config.MaxActive).
	DefaultMaxActive = 1_000_000
	// DefaultCacheBytes bounds the memory the ready windows spend on cached
	// jobs, across every queue.
	DefaultCacheBytes = 64 << 20
	// minReadyWindow keeps a window useful even when configured tiny.
	minReadyWindow = 16
	// readConns bounds the read pool.
	readConns = 4
	// minFreeBytes is the room the data folder's disk needs, after a write
	// failed for a full disk, before the store reports ready again.
	minFreeBytes = 8 << 20
)

// Config configures a Store.
type Config struct {
	// Dir is the data folder; it is created if missing. The database file
	// is Dir/spool.db. Required: there is no default.
	Dir string
	// Sync is the durability of every commit: "full" fsyncs the write-ahead
	// log before answering, so an answered change survives power loss;
	// "normal" (WAL synchronous=NORMAL) survives a crash of the process but
	// may lose the last commits on power loss. Defaults to "full".
	Sync string
	// MaxBatchOps bounds how much work one group commit takes, counted in
	// jobs or items: a call carrying n jobs or items counts n, any other
	// call counts one. A single call larger than the bound still commits
	// alone. Defaults to DefaultMaxBatchOps.
	MaxBatchOps int
	// ReadyWindow is how many available jobs per queue the store keeps in
	// memory in claim order. Defaults to DefaultReadyWindow.
	ReadyWindow int
	// MaxActive bounds how many jobs may be active (leased) at once: a
	// claim beyond it hands out nothing until leases end. Each lease takes
	// a few hundred bytes of memory. Defaults to DefaultMaxActive.
	MaxActive int
	// CacheBytes bounds the memory spent keeping newly enqueued jobs in the
	// ready windows, so that fetching them soon after needs no read.
	// Defaults to DefaultCacheBytes; negative disables the cache.
	CacheBytes int64
	// Memory makes this a store of memory-durability jobs only: Dir should
	// be on a memory file system; it is emptied at open and removed at
	// close, commits never wait for the disk, and every job is gone after
	// a restart.
	Memory bool
	// TokensFrom, when set, is the durable store whose fencing tokens this
	// store hands out, instead of its own: a memory store beside a durable
	// one takes its tokens, so that the two never hand out one token twice
	// and a restart moves both on. TokensFrom must stay open while this
	// store is. Defaults to nil: the store's own.
	TokensFrom *Store
	// Logger receives commit failures and other store events. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnCommit, when set, is told of every group commit: its time until
	// its calls are answered (its fsync included when it needs one), its
	// calls and their jobs. It runs on the goroutine that ran the batch
	// or the syncer's, just before the answers, and must not block.
	// Defaults to nil.
	OnCommit func(store.CommitStats)
}

func (c *Config) normalize() error {
	if c.Dir == "" {
		return fmt.Errorf("open store: data folder is required")
	}
	switch c.Sync {
	case "":
		c.Sync = "full"
	case "full", "normal":
	default:
		return fmt.Errorf("open store: sync %q is not full or normal", c.Sync)
	}
	if c.MaxBatchOps <= 0 {
		c.MaxBatchOps = DefaultMaxBatchOps
	}
	if c.ReadyWindow <= 0 {
		c.ReadyWindow = DefaultReadyWindow
	}
	if c.ReadyWindow < minReadyWindow {
		c.ReadyWindow = minReadyWindow
	}
	if c.MaxActive <= 0 {
		c.MaxActive = DefaultMaxActive
	}
	switch {
	case c.CacheBytes == 0:
		c.CacheBytes = DefaultCacheBytes
	case c.CacheBytes < 0:
		c.CacheBytes = 0
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
