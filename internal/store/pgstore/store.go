// Package pgstore is Spool's store for several nodes: the store.Store
// contract on one PostgreSQL database that any number of Spool servers share.
//
// Every call is one transaction (most are one statement) that PostgreSQL
// commits durably before the call returns: flushed to disk, except that a
// transaction writing only process-durability jobs leaves its flush to the
// WAL writer (see durability.go). Claims take jobs in batches with FOR
// UPDATE SKIP LOCKED, so nodes claiming from one queue never wait on each
// other nor hand a job out twice; a queue with flow control (limits,
// groups or ordered groups, see flow.go and flowclaim.go) is claimed
// instead in a transaction that locks its row, so that its limits hold
// across the nodes. A change that makes jobs available sends a NOTIFY in
// its own transaction, after the commit; each node LISTENs and wakes its
// parked fetches (Hooks.OnAvailable). A plain insert sends it only when
// another node listens (see listeners.go). A job inserted into a queue
// with consumer groups gets its copies in the transaction that inserts it
// (see lanes.go). The store also offers what the nodes need to agree
// without talking to each other: the database clock (Now) and an
// advisory-lock leader election (LeaderLock).
//
// All objects live in the connection's current schema (search_path), so
// several Spool installations can share one database in separate schemas.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/internal/store"
)

// Defaults of Config.
const (
	// DefaultMaxConns bounds the connection pool of one node unless the URL
	// sets pool_max_conns. Parked fetches hold no connection, so a small
	// pool serves many clients.
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds one connection attempt unless the URL
	// sets connect_timeout, so that calls fail quickly (503) while the
	// database is down instead of hanging.
	DefaultConnectTimeout = 3 * time.Second
	// clockRefresh is how often a node measures the database clock again.
	clockRefresh = 10 * time.Second
)

// Config configures a Store.
type Config struct {
	// URL is the PostgreSQL connection URL (postgres://user:pass@host/db?…).
	// Its search_path, if set, chooses the schema. Required.
	URL string
	// Migrate applies pending schema migrations at Open. Without it, Open
	// fails unless the schema is current (see Migrate).
	Migrate bool
	// Hooks are called when other nodes make jobs available or delete
	// consumer groups. Optional; without OnAvailable the store does not
	// listen to the other nodes at all.
	Hooks store.Hooks
	// Logger receives listener, rollup and clock events. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// OnCommit, when set, is told of every write transaction the store
	// commits (its time from BEGIN to the end of COMMIT; one call, jobs
	// not counted), and of every one-statement ack. Plain claims, one
	// statement each outside a transaction, are not timed. It must not
	// block. Defaults to nil.
	OnCommit func(store.CommitStats)
}

// Store is the PostgreSQL store. It implements store.Store and is safe for
// concurrent use. It is made of parts with one job each, whose methods
// it offers as its own: the inserter (Inserter), the claimer and the
// finisher (Claimer), the transactor (Transactor), admin, the queue
// reader, flow control and the consumer groups (Admin, ConsumerGroups),
// the maintainer and the expirer (Maintainer), the scheduler (Scheduler)
// and the sessions (Sessions). They share the db and the node's beliefs
// about the queues; the listener hears the other nodes.
type Store struct {
	*db
	*beliefs
	*inserter
	*claimer
	*finisher
	*transactor
	*admin
	*queueReader
	*flowControl
	*consumerGroups
	*maintainer
	*expirer
	*scheduler
	*sessions
	*listener
	cfg   Config
	clock clock

	stop      context.CancelFunc
	bg        sync.WaitGroup
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to cfg.URL, applies or checks the schema, measures the
// database clock and starts the background work of the store: the count
// rollup and, when cfg.Hooks.OnAvailable is set, the listener.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("open store: database URL is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pcfg, err := poolConfig(cfg.URL)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", mapErr(err))
	}
	node := newNodeID()
	s := newStore(cfg, &db{pool: pool, connCfg: pcfg.ConnConfig, logger: cfg.Logger, node: node,
		ann: newAnnouncer(pcfg.ConnConfig, node, cfg.Logger), onCommit: cfg.OnCommit})
	if err := s.open(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.inserter.combine = newCombiner(bgCtx)
	s.goBackground(func() { s.rollupLoop(bgCtx) })
	s.goBackground(func() { s.clockLoop(bgCtx) })
	s.goBackground(func() { s.ann.run(bgCtx) })
	if cfg.Hooks.OnAvailable != nil {
		s.goBackground(func() { s.listen(bgCtx) })
	}
	return s, nil
}

// newStore puts the parts of a store together on d.
func newStore(cfg Config, d *db) *Store {
	b := &beliefs{db: d, defaults: newDefaultsCache()}
	reader := &queueReader{d, b}
	flow := &flowControl{d, b}
	groups := &consumerGroups{db: d, beliefs: b, queues: reader}
	letters := &deadLetters{db: d, beliefs: b, flow: flow, groups: groups}
	fin := &finisher{d, letters}
	ins := &inserter{db: d, beliefs: b, flow: flow, groups: groups}
	exp := &expirer{d, fin}
	return &Store{
		db: d, beliefs: b, inserter: ins, claimer: &claimer{d, b, exp}, finisher: fin,
		transactor: &transactor{d, b, fin, ins}, admin: &admin{d, b}, queueReader: reader, flowControl: flow,
		consumerGroups: groups, maintainer: newMaintainer(d, fin), expirer: exp, scheduler: newScheduler(d, ins),
		sessions: newSessions(d), listener: &listener{d, b, cfg.Hooks}, cfg: cfg,
	}
}

func (s *Store) open(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return mapErr(err)
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&s.schema); err != nil {
		return fmt.Errorf("read schema: %w", mapErr(err))
	}
	if s.schema == "" {
		return errors.New("no schema: the search_path names no schema that exists")
	}
	s.channel = "spool_" + hashHex(s.schema)
	s.ann.channel = s.channel
	if s.cfg.Migrate {
		if _, _, err := migrate(ctx, conn.Conn()); err != nil {
			return fmt.Errorf("migrate schema: %w", mapErr(err))
		}
	} else if err := checkVersion(ctx, conn.Conn()); err != nil {
		return err
	}
	return s.clock.measure(ctx, conn.Conn())
}

// Migrate applies the pending schema migrations of the database at url,
// as `spool migrate` does, and returns the versions before and after.
// Nodes that start at once are safe: an advisory lock lets one migrate.
func Migrate(ctx context.Context, url string) (from, to int, err error) {
	pcfg, err := poolConfig(url)
	if err != nil {
		return 0, 0, err
	}
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig)
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", mapErr(err))
	}
	defer conn.Close(context.Background())
	from, to, err = migrate(ctx, conn)
	if err != nil {
		return from, to, fmt.Errorf("migrate schema: %w", mapErr(err))
	}
	return from, to, nil
}

func checkVersion(ctx context.Context, conn *pgx.Conn) error {
	var version int
	err := conn.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM spool_migrations`).Scan(&version)
	if err != nil {
		return fmt.Errorf("read schema version (run spool migrate): %w", mapErr(err))
	}
	if version != len(migrations) {
		return fmt.Errorf("schema version %d, this binary needs %d: run spool migrate", version, len(migrations))
	}
	return nil
}

// poolConfig parses url and applies the defaults the URL does not set.
func poolConfig(url string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if !urlSets(url, "pool_max_conns") {
		pcfg.MaxConns = DefaultMaxConns
	}
	if !urlSets(url, "connect_timeout") {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pcfg.HealthCheckPeriod = 5 * time.Second
	return pcfg, nil
}

// Capabilities reports a store shared by several nodes that tells each
// node of jobs the others made available.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{MultiNode: true, ListenNotify: true}
}

// Ping reports whether the store can serve: it is open and the database
// answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("ping store: %w", mapErr(err))
	}
	return nil
}

// Close stops the background work, waits for calls in flight and closes
// the pool. Later calls get job.ErrUnavailable. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.stop()
		s.bg.Wait()
		s.pool.Close()
	})
	return nil
}

// Now is the database server's clock as this node measured it: the local
// clock plus an offset refreshed every few seconds. Nodes that use it for
// their engines agree on lease expiries whatever their own clocks say.
func (s *Store) Now() time.Time { return s.clock.now() }

// LeaderLock returns the leader election lock of the store's schema.
func (s *Store) LeaderLock() *LeaderLock {
	return &LeaderLock{db: s.db, key: s.lockKey("leader")}
}

// clockLoop measures the clock again every clockRefresh until ctx ends; a
// failed measurement keeps the last offset.
func (s *Store) clockLoop(ctx context.Context) {
	t := time.NewTicker(clockRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		conn, err := s.pool.Acquire(ctx)
		if err == nil {
			err = s.clock.measure(ctx, conn.Conn())
			conn.Release()
		}
		if err != nil && ctx.Err() == nil {
			s.logger.Debug("pgstore: measure the database clock", "err", err)
		}
	}
}

func (s *Store) goBackground(fn func()) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn()
	}()
}

func newNodeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func hashHex(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())
}
