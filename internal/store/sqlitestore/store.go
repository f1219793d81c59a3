// Package sqlitestore is Spool's embedded default store: one SQLite database
// in WAL mode owned by one process.
//
// Every change goes through one writer that owns the only write connection
// and commits whatever operations are waiting in one transaction (group
// commit), answering callers only after the commit is durable; an
// operation that fails unexpectedly is split off into a transaction of its
// own so that it never takes the others down with it. A batch runs on the
// writer's goroutine, or on the goroutine of a caller that found the writer
// idle. The writer keeps, per queue, a bounded in-memory window
// of the next available jobs in claim order, so that a claim rarely asks the
// database what to hand out, and the per-queue counts by state, so that
// listing queues costs no query. Reads (JobGet, JobList, Ping) use a separate
// connection pool and run beside the writer.
package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/spoolq/spool/internal/job"
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
	// busyTimeoutMillis is how long a connection waits for a lock held by
	// another process before failing with "database is locked": how long
	// a server starting on a data folder in use waits for the other
	// process to let go of it (see exclusiveVFS).
	busyTimeoutMillis = 5000
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
	// calls and their jobs. It runs on the writer's goroutine or the
	// syncer's, just before the answers, and must not block. Defaults to
	// nil.
	OnCommit func(store.CommitStats)
}

// Store is the embedded SQLite store. It implements store.Store and is safe
// for concurrent use.
type Store struct {
	cfg    Config
	logger *slog.Logger
	wdb    *sql.DB // one connection, owned by the writer
	rdb    *sql.DB // the read pool
	w      *writer
	cat    *catalog
	leases *leaseTable

	// mu guards closed; submitters hold it shared while they hand an
	// operation to the writer, so that Close never races a send.
	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database in cfg.Dir, applies schema
// migrations, loads the queue catalog and counts, and starts the writer.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if cfg.Memory {
		// Memory jobs do not outlive the process that held them.
		if err := os.RemoveAll(cfg.Dir); err != nil {
			return nil, fmt.Errorf("empty memory folder: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	path := filepath.Join(cfg.Dir, "spool.db")
	// In the full mode the writer's commits are fsynced by its syncer
	// (syncer.go), behind the writer, not by SQLite within each commit.
	sync := "normal"
	if cfg.Memory {
		sync = "off"
	}
	if err := registerWALBuffer(); err != nil {
		return nil, err
	}
	wdb, err := sql.Open("sqlite3", dsn(path, sync, false))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	s := &Store{cfg: cfg, logger: cfg.Logger, wdb: wdb}
	if err := s.open(ctx, path); err != nil {
		_ = s.closeDBs()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, path string) error {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		if busy(err) {
			return fmt.Errorf("open database: data folder %s is in use by another process: %w", s.cfg.Dir, mapErr(err))
		}
		return fmt.Errorf("open database: %w", mapErr(err))
	}
	if err := migrate(ctx, conn); err != nil {
		_ = conn.Close()
		return fmt.Errorf("migrate schema: %w", mapErr(err))
	}
	s.rdb, err = sql.Open("sqlite3", dsn(path, "normal", true))
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("open read pool: %w", err)
	}
	s.rdb.SetMaxOpenConns(readConns)
	s.rdb.SetMaxIdleConns(readConns)
	s.cat, err = loadCatalog(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("load queues: %w", mapErr(err))
	}
	s.leases, err = loadLeases(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("load leases: %w", mapErr(err))
	}
	tokens := &tokenSource{}
	if from := s.cfg.TokensFrom; from != nil {
		tokens = from.w.tokens
	} else {
		epoch, err := nextEpoch(ctx, conn)
		if err != nil {
			_ = conn.Close()
			return fmt.Errorf("open store: %w", mapErr(err))
		}
		tokens.start(epoch)
	}
	s.w, err = newWriter(ctx, conn, s.cfg, s.cat, s.leases, tokens)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("start writer: %w", mapErr(err))
	}
	sync := s.cfg.Sync
	if s.cfg.Memory {
		sync = "off"
	}
	if s.w.ckpt, err = newCheckpointer(path, sync, s.logger); err != nil {
		return err
	}
	if s.cfg.Sync == "full" && !s.cfg.Memory {
		if s.w.sync, err = newSyncer(s.w, path); err != nil {
			return fmt.Errorf("start syncing: %w", err)
		}
	}
	go s.w.run()
	return nil
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

// dsn is the go-sqlite3 connection string for path; sync is full, normal
// or off.
func dsn(path, sync string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(busyTimeoutMillis))
	q.Set("_foreign_keys", "0")
	switch sync {
	case "normal":
		q.Set("_synchronous", "NORMAL")
	case "off":
		q.Set("_synchronous", "OFF")
	default:
		q.Set("_synchronous", "FULL")
	}
	if readOnly {
		q.Set("_query_only", "1")
		q.Set("_cache_size", "-16384")
		q.Set("vfs", exclusiveVFS)
	} else {
		q.Set("_cache_size", "-65536")
		q.Set("vfs", walBufferVFS)
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Capabilities reports a single-process store without cross-node wake-ups.
func (s *Store) Capabilities() store.Capabilities { return store.Capabilities{} }

// Ping reports whether the store can serve: it is open, its writer has not
// failed, the database answers a read, and, after a write failed for a
// full disk, the disk has room again (job.ErrStorageFull until then). A
// single small write can still succeed on a nearly full disk, so readiness
// waits for minFreeBytes rather than for one success.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if err := s.w.failure(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if s.w.full.Load() {
		if free, ok := freeBytes(s.cfg.Dir); ok && free < minFreeBytes {
			return fmt.Errorf("ping store: %d bytes free on the data folder's disk: %w", free, job.ErrStorageFull)
		}
		s.w.full.Store(false)
	}
	var one int
	if err := s.rdb.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping store: %w", mapErr(err))
	}
	return nil
}

// Close stops accepting calls (later ones get job.ErrUnavailable), lets
// the writer commit every operation already handed to it, writes the
// leases of active jobs to the database so that they are honoured after a
// restart, and closes the database. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		keep := &op{ctx: context.Background(), fn: (*writer).persistAll, weight: 1, done: make(chan error, 1)}
		s.w.ops <- keep
		if err := <-keep.done; err != nil {
			s.logger.Error("sqlitestore: leases not written at close; their jobs will be handed out again", "err", err)
		}
		close(s.w.ops)
		<-s.w.done
		s.closeErr = s.closeDBs()
		if s.cfg.Memory {
			// Its jobs end with the process; so does the memory they took.
			if err := os.RemoveAll(s.cfg.Dir); err != nil && s.closeErr == nil {
				s.closeErr = fmt.Errorf("remove memory folder: %w", err)
			}
		}
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var first error
	if s.w != nil && s.w.ckpt != nil {
		first = s.w.ckpt.close()
	}
	if s.w != nil {
		if err := s.w.close(); err != nil && first == nil {
			first = err
		}
	}
	if s.rdb != nil {
		if err := s.rdb.Close(); err != nil && first == nil {
			first = fmt.Errorf("close read pool: %w", err)
		}
	}
	if err := s.wdb.Close(); err != nil && first == nil {
		first = fmt.Errorf("close database: %w", err)
	}
	return first
}

var errClosed = fmt.Errorf("store closed: %w", job.ErrUnavailable)

// check reports errClosed once Close began.
func (s *Store) check() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	return nil
}

// do hands fn to the writer, which runs it inside the next group commit, and
// waits for the commit. weight is how much of a batch fn uses (jobs or
// items, at least one).
func (s *Store) do(ctx context.Context, weight int, fn func(*writer) error) error {
	return s.doRelaxed(ctx, weight, nil, fn)
}

// doRelaxed is do for an operation that may not need its commit fsynced:
// relaxed, run by the writer before the batch begins, reports whether
// everything the operation will write is of process durability (or
// nothing at all). A batch made only of such operations commits without
// waiting for the disk.
func (s *Store) doRelaxed(ctx context.Context, weight int, relaxed func(*writer) bool, fn func(*writer) error) error {
	o := &op{ctx: ctx, fn: fn, relaxed: relaxed, weight: max(weight, 1), done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	if s.w.waiting.Load() == 0 && s.w.turn.TryLock() {
		if !s.w.shared {
			s.commitHere(o)
			s.mu.RUnlock()
			s.syncHere(ctx)
			return <-o.done
		}
		s.w.turn.Unlock()
	}
	o.queued = true
	s.w.waiting.Add(1)
	select {
	case s.w.ops <- o:
	case <-ctx.Done():
		s.w.waiting.Add(-1)
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitHere runs o's batch on the caller's goroutine, which found the
// writer idle and holds its turn: a lone caller then saves two hand-overs
// between goroutines, to the writer and back, each a thread woken on a
// machine with an idle core. Operations queued meanwhile join the batch,
// as they would the writer's. It is not used right after a shared batch:
// under load the writer's goroutine, which lets callers join before it
// gathers (letCallersJoin), makes larger batches (at 50 producers, about
// 8 jobs a commit against 6, and 4 % more enqueues a second at full
// durability). The caller holds mu shared, so ops stays open. It releases
// the turn; the caller then runs the fsync its batch waits for
// (syncHere), so that the next batch commits meanwhile. o is answered
// once the batch is durable, which, when both fsyncs are under way, may be
// after syncHere returns.
func (s *Store) commitHere(o *op) {
	for next := o; next != nil; {
		next, _ = s.w.runBatch(next)
	}
	s.w.turn.Unlock()
}

// syncHere runs the fsync that waits for dispatch, if any, on the caller's
// goroutine, after commitHere. When one waits, it first calls the join
// function of ctx (store.WithSyncJoin): the writes made there commit
// before the fsync begins, and share it. The caller holds mu no more, so
// that join may write through the store; a Close meanwhile hands the
// fsync to a lane (syncer.stop), and dispatch then finds none.
func (s *Store) syncHere(ctx context.Context) {
	if s.w.sync == nil {
		return
	}
	if join := store.SyncJoin(ctx); join != nil && s.w.sync.awaitsDispatch() {
		join()
	}
	s.w.sync.dispatch(true)
}
