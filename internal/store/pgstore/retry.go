package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/internal/store"
)

// maxAttempts bounds how often a call runs again after PostgreSQL chose it
// as the victim of a deadlock or a serialization failure. Both roll the
// transaction back whole, so running it again is safe.
const maxAttempts = 4

// retry runs fn, again when it failed with a deadlock or serialization
// failure.
func (s *Store) retry(ctx context.Context, fn func() error) error {
	var err error
	for range maxAttempts {
		if err = s.check(); err != nil {
			return err
		}
		if err = fn(); err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// retryTx runs fn in a transaction with retry, then the test hook
// beforeCommit if one is set. The announcements fn made (announceOnCommit)
// go out once the transaction has committed.
func (s *Store) retryTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.retry(ctx, func() error {
		return s.timed(func() error {
			c, err := s.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			tx := &lazyTx{conn: c.Conn()}
			err = s.runTx(ctx, tx, fn)
			s.ann.settle(tx, err == nil)
			return err
		})
	})
}

// runTx runs fn and the test hook beforeCommit in tx and commits it, or
// rolls it back on any error.
func (s *Store) runTx(ctx context.Context, tx pgx.Tx, fn func(pgx.Tx) error) error {
	defer func() { _ = tx.Rollback(ctx) }()
	if err := fn(tx); err != nil {
		return err
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// beginner is a pool or a connection of it.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// retryTxOn is retryTx on db.
func (s *Store) retryTxOn(ctx context.Context, db beginner, fn func(pgx.Tx) error) error {
	return s.retry(ctx, func() error {
		return s.timed(func() error {
			tx, err := db.Begin(ctx)
			if err != nil {
				return err
			}
			err = s.runTx(ctx, tx, fn)
			s.ann.settle(tx, err == nil)
			return err
		})
	})
}

// timed runs fn, a write that commits, and tells Config.OnCommit how long
// it took when it succeeded.
func (s *Store) timed(fn func() error) error {
	if s.cfg.OnCommit == nil {
		return fn()
	}
	start := time.Now()
	err := fn()
	if err == nil {
		s.cfg.OnCommit(store.CommitStats{Elapsed: time.Since(start), Calls: 1})
	}
	return err
}

// transient reports a deadlock or serialization failure.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
