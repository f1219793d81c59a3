// Package sqlitestore is Spool's embedded default store: one SQLite database
// in WAL mode owned by one process.
//
// Every change goes through one writer that owns the only write connection
// and commits whatever operations are waiting in one transaction (group
// commit), answering callers only after the commit is durable; an
// operation that fails unexpectedly is split off into a transaction of its
// own so that it never takes the others down with it. A batch runs on the
// committer's goroutine, or on the goroutine of a caller that found the
// committer idle (commit.go). The writer keeps, per queue, a bounded in-memory window
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
	"os"
	"path/filepath"
	"sync"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Store is the embedded SQLite store. It implements store.Store and is safe
// for concurrent use.
type Store struct {
	cfg    Config
	logger *slog.Logger
	wdb    *sql.DB // one connection, owned by the writer
	rdb    *sql.DB // the read pool
	w      *writer
	c      *committer // runs the calls that write on w
	counts *counts
	leases *leaseTable
	*sessions
	*schedules
	*maintenance

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database in cfg.Dir, applies schema
// migrations, loads the queues and their counts, and starts the writer.
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
	s.sessions, s.schedules, s.maintenance = newSessions(s), newSchedules(s), newMaintenance(s)
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
	s.counts, err = loadCounts(ctx, conn)
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
	var tokensFrom *committer
	if from := s.cfg.TokensFrom; from != nil {
		tokens, tokensFrom = from.w.tokens, from.c
	} else {
		epoch, err := nextEpoch(ctx, conn)
		if err != nil {
			_ = conn.Close()
			return fmt.Errorf("open store: %w", mapErr(err))
		}
		tokens.start(epoch)
	}
	s.w, err = newWriter(ctx, conn, s.cfg, s.counts, s.leases, tokens)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("start writer: %w", mapErr(err))
	}
	s.c = newCommitter(s.w, s.cfg)
	s.c.tokensFrom = tokensFrom
	sync := s.cfg.Sync
	if s.cfg.Memory {
		sync = "off"
	}
	if s.c.ckpt, err = newCheckpointer(path, sync, s.logger); err != nil {
		return err
	}
	if s.cfg.Sync == "full" && !s.cfg.Memory {
		if s.c.sync, err = newSyncer(&s.c.failState, path); err != nil {
			return fmt.Errorf("start syncing: %w", err)
		}
	}
	go s.c.run()
	return nil
}

// writesNothing marks operations that change memory only (see doRelaxed).
func writesNothing(*writer) bool { return true }

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
	if err := s.c.failure(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if s.c.full.Load() {
		if free, ok := freeBytes(s.cfg.Dir); ok && free < minFreeBytes {
			return fmt.Errorf("ping store: %d bytes free on the data folder's disk: %w", free, job.ErrStorageFull)
		}
		s.c.full.Store(false)
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
		if err := s.c.stop((*writer).persistAll); err != nil {
			s.logger.Error("sqlitestore: leases not written at close; their jobs will be handed out again", "err", err)
		}
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
	if s.c != nil && s.c.ckpt != nil {
		first = s.c.ckpt.close()
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

// check reports errClosed once Close began.
func (s *Store) check() error { return s.c.check() }

// do hands fn to the committer, which runs it on the writer inside the
// next group commit, and waits for the commit. weight is how much of a
// batch fn uses (jobs or items, at least one).
func (s *Store) do(ctx context.Context, weight int, fn func(*writer) error) error {
	return s.c.do(ctx, weight, nil, fn)
}

// doRelaxed is do for an operation that may not need its commit fsynced:
// relaxed, run before the batch begins, reports whether everything the
// operation will write is of process durability (or nothing at all). A
// batch made only of such operations commits without waiting for the
// disk.
func (s *Store) doRelaxed(ctx context.Context, weight int, relaxed func(*writer) bool, fn func(*writer) error) error {
	return s.c.do(ctx, weight, relaxed, fn)
}

// call runs fn as one operation of the writer, of weight 1, and returns
// what it made; an error comes wrapped as what, with the zero T.
func call[T any](ctx context.Context, s *Store, what string, fn func(*writer) (T, error)) (T, error) {
	var out T
	err := s.do(ctx, 1, func(w *writer) (err error) {
		out, err = fn(w)
		return err
	})
	if err != nil {
		var zero T
		return zero, wrap(what, err)
	}
	return out, nil
}

// Active reports whether job id holds a lease in this store. It reads
// memory only, so a caller that routes calls between stores can ask it on
// every call.
func (s *Store) Active(id string) bool {
	_, ok := s.leases.viewOf(id)
	return ok
}
