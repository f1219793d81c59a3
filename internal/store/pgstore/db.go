package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// db is what every part of the store shares: the pool, the names of the
// schema's objects, the node's id, and the transactions, which run again
// after a deadlock and send their announcements once they committed.
type db struct {
	pool    *pgxpool.Pool
	connCfg *pgx.ConnConfig
	logger  *slog.Logger
	schema  string
	channel string // NOTIFY channel of this schema
	node    string // random id of this store, to skip its own notifications
	ann     *announcer
	// onCommit is Config.OnCommit.
	onCommit func(store.CommitStats)
	// beforeCommit is a test hook: when set (before the first call), it
	// runs in every transaction of the store's calls, after their writes
	// and just before the commit, and JobComplete runs its statement in
	// such a transaction instead of on its own.
	beforeCommit func(ctx context.Context, tx pgx.Tx) error

	mu     sync.RWMutex
	closed bool

	thenMu sync.Mutex
	then   map[pgx.Tx][]func() // what runs once a transaction committed
}

var errClosed = fmt.Errorf("store closed: %w", job.ErrUnavailable)

// check reports errClosed once Close began.
func (d *db) check() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return errClosed
	}
	return nil
}

// lockClass is the first key of every advisory lock Spool takes ("SPOO");
// the second is a hash of the schema and the lock's purpose.
const lockClass = 0x53504f4f

// The flow lock of a queue (see flow.go) orders what changes the way
// its jobs are written with every transaction that writes them.
const (
	// sqlLockFlow takes the exclusive flow lock of the queues $1, in key
	// order, so that it never waits in a cycle with another. A consumer
	// group's lane shares its queue's lock (flowLockKey), so that an
	// insert that holds its queue's lock shared may copy its jobs into the
	// lanes (lanes.go).
	sqlLockFlow = `SELECT pg_advisory_xact_lock($2, k)
FROM (SELECT DISTINCT ` + flowLockKey + ` AS k FROM unnest($1::text[]) AS q) x ORDER BY k`
	// sqlLockFlowShared takes the flow lock of the queues $1 shared, in
	// key order.
	sqlLockFlowShared = `SELECT pg_advisory_xact_lock_shared($2, k)
FROM (SELECT DISTINCT ` + flowLockKey + ` AS k FROM unnest($1::text[]) AS q) x ORDER BY k`
	// sqlLockFlowOfJobs takes shared, in key order, the flow locks of the
	// queues of the jobs of the ids $1, pending or finished.
	sqlLockFlowOfJobs = `SELECT pg_advisory_xact_lock_shared($2, k) FROM (SELECT DISTINCT ` + flowLockKey + ` AS k FROM (
	SELECT queue FROM spool_jobs WHERE id = ANY($1::text[])
	UNION ALL SELECT queue FROM spool_jobs_done WHERE id = ANY($1::text[])) j(q)) x ORDER BY k`
	// flowLockKey is the key of the flow lock of queue q: that of the
	// queue itself for a consumer group's lane.
	flowLockKey = `hashtext(current_schema() || ':flow:' || split_part(q, '` + job.LaneSep + `', 1))`
)

// lockKey is the second key of the advisory lock for purpose in this
// store's schema.
func (d *db) lockKey(purpose string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(d.schema + ":" + purpose))
	return int32(h.Sum32())
}

// maxAttempts bounds how often a call runs again after PostgreSQL chose it
// as the victim of a deadlock or a serialization failure. Both roll the
// transaction back whole, so running it again is safe.
const maxAttempts = 4

// retry runs fn, again when it failed with a deadlock or serialization
// failure.
func (d *db) retry(ctx context.Context, fn func() error) error {
	var err error
	for range maxAttempts {
		if err = d.check(); err != nil {
			return err
		}
		if err = fn(); err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// tx runs fn in a transaction and commits it, then the test hook
// beforeCommit if one is set; any error rolls it back. A deadlock or
// serialization failure runs it again. The announcements fn made
// (announceOnCommit) go out once the transaction has committed.
func (d *db) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return d.retry(ctx, func() error {
		return d.timed(func() error {
			c, err := d.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			tx := &lazyTx{conn: c.Conn()}
			err = d.runTx(ctx, tx, fn)
			d.settle(tx, err == nil)
			return err
		})
	})
}

// beginner is a pool or a connection of it.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// txOn is tx on db.
func (d *db) txOn(ctx context.Context, db beginner, fn func(pgx.Tx) error) error {
	return d.retry(ctx, func() error {
		return d.timed(func() error {
			tx, err := db.Begin(ctx)
			if err != nil {
				return err
			}
			err = d.runTx(ctx, tx, fn)
			d.settle(tx, err == nil)
			return err
		})
	})
}

// runTx runs fn and the test hook beforeCommit in tx and commits it, or
// rolls it back on any error.
func (d *db) runTx(ctx context.Context, tx pgx.Tx, fn func(pgx.Tx) error) error {
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if d.beforeCommit != nil {
		if err := d.beforeCommit(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// timed runs fn, a write that commits, and tells Config.OnCommit how long
// it took when it succeeded.
func (d *db) timed(fn func() error) error {
	if d.onCommit == nil {
		return fn()
	}
	start := time.Now()
	err := fn()
	if err == nil {
		d.onCommit(store.CommitStats{Elapsed: time.Since(start), Calls: 1})
	}
	return err
}

// transient reports a deadlock or serialization failure.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// afterCommit runs fn once tx, a transaction of tx or txOn, has
// committed, and never if it rolls back: what a node learns from a
// transaction holds only once the transaction does.
func (d *db) afterCommit(tx pgx.Tx, fn func()) {
	d.thenMu.Lock()
	defer d.thenMu.Unlock()
	if d.then == nil {
		d.then = make(map[pgx.Tx][]func())
	}
	d.then[tx] = append(d.then[tx], fn)
}

// settle ends tx: when it committed, its announcements go out and what
// waited for its commit runs.
func (d *db) settle(tx pgx.Tx, committed bool) {
	d.ann.settle(tx, committed)
	d.thenMu.Lock()
	then := d.then[tx]
	delete(d.then, tx)
	d.thenMu.Unlock()
	for _, fn := range then {
		if committed {
			fn()
		}
	}
}

// announceOnCommit records that tx made jobs available in queues. The
// notifications go out once tx has committed (see announcer), and not at
// all if it rolls back.
func (d *db) announceOnCommit(tx pgx.Tx, queues []string) {
	d.ann.hold(tx, queues)
}

// notify sends, in tx, the notifications with tag (settingsTag,
// groupsTag) that name queues; they go out when tx commits.
func (d *db) notify(ctx context.Context, tx pgx.Tx, tag string, queues []string) error {
	for _, p := range notifyPayloads(d.node+tag, queues) {
		if _, err := tx.Exec(ctx, sqlNotify, d.channel, p); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
}

// The tags that follow a node's id in a notification about something
// other than available jobs. Node ids are hex, so a tag never makes
// another node's id: a node of an older version reads such a
// notification as jobs made available, which only wakes its fetches.
const (
	// settingsTag: the queues' defaults or settings changed.
	settingsTag = "!settings"
	// groupsTag: consumer groups were deleted; the names are their lanes.
	groupsTag = "!groups"
)

// readNotification splits a notification's payload into the sending node,
// its tag (settingsTag, groupsTag, or empty for available jobs) and the
// names it carries.
func readNotification(payload string) (node, tag string, queues []string, ok bool) {
	head, list, ok := strings.Cut(payload, " ")
	if !ok || list == "" {
		return "", "", nil, false
	}
	node = head
	if i := strings.IndexByte(head, '!'); i >= 0 {
		node, tag = head[:i], head[i:]
	}
	return node, tag, strings.Split(list, ","), true
}
