package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lazyTx is a transaction on one connection whose BEGIN goes out with its
// first batch or Exec, in the same round trip, rather than on its own: a
// call that writes with one batch and commits takes two round trips
// instead of three. Query, QueryRow and CopyFrom send the BEGIN first on
// its own. It has no savepoints (Begin fails).
type lazyTx struct {
	conn   *pgx.Conn
	begun  bool // BEGIN was sent
	closed bool // committed or rolled back
}

var _ pgx.Tx = (*lazyTx)(nil)

// sqlBegin opens a transaction.
const sqlBegin = "begin"

// begin sends BEGIN on its own if it has not gone out yet.
func (t *lazyTx) begin(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	t.begun = true
	if _, err := t.conn.Exec(ctx, sqlBegin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

// Begin is not supported: the store's transactions use no savepoints.
func (t *lazyTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pgstore: savepoints are not supported")
}

// Commit commits the transaction; one that sent nothing has nothing to
// commit.
func (t *lazyTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		if t.conn.PgConn().TxStatus() != 'I' {
			_ = t.conn.Close(ctx)
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback rolls the transaction back; it is safe to call after Commit.
func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
		_ = t.conn.Close(ctx)
		return err
	}
	return nil
}

// SendBatch sends b, after a BEGIN in the same round trip if none went
// out yet.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed {
		return &failedBatch{tx: t, err: pgx.ErrTxClosed}
	}
	if t.begun {
		return txBatch{t.conn.SendBatch(ctx, b), t}
	}
	t.begun = true
	withBegin := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	withBegin.Queue(sqlBegin)
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, withBegin)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return &failedBatch{tx: t, err: fmt.Errorf("begin: %w", err)}
	}
	return txBatch{br, t}
}

// Exec runs sql, after a BEGIN in the same round trip if none went out
// yet.
func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql in the transaction.
func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs sql in the transaction.
func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

// CopyFrom copies rows in the transaction.
func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares a statement on the transaction's connection.
func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// LargeObjects is not supported.
func (t *lazyTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn returns the transaction's connection.
func (t *lazyTx) Conn() *pgx.Conn { return t.conn }

// txBatch is the results of a batch sent in tx.
type txBatch struct {
	pgx.BatchResults
	tx *lazyTx
}

// Tx returns the transaction the batch was sent in.
func (b txBatch) Tx() pgx.Tx { return b.tx }

// failedBatch is the results of a batch that could not be sent.
type failedBatch struct {
	tx  *lazyTx
	err error
}

func (b *failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b *failedBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b *failedBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b *failedBatch) Close() error                     { return b.err }
func (b *failedBatch) Tx() pgx.Tx                       { return b.tx }

// errRow is a row whose scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
