package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// tokenSource hands out fencing tokens. A token is epoch<<32 | n: the
// epoch is stored in the database and moves on at every open (and after
// 2^31 hand-outs), so every token of a process is higher than every token
// of the processes before it, crashed ones included, whose hand-outs were
// never written. Tokens stay below 2^53 for the first two million epochs,
// so clients that read JSON numbers as doubles see them exactly.
type tokenSource struct {
	epoch, n int64
}

// tokenRenewAt is the count of hand-outs after which the writer moves to a
// new epoch before its next batch.
const tokenRenewAt = 1 << 31

// take returns the next token.
func (t *tokenSource) take() int64 {
	t.n++
	return t.epoch<<32 | t.n
}

const (
	sqlReadEpoch  = `SELECT value FROM meta WHERE key = 'epoch'`
	sqlWriteEpoch = `INSERT INTO meta (key, value) VALUES ('epoch', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`
)

// nextEpoch moves the stored epoch on by one, durably, and returns a token
// source for it.
func nextEpoch(ctx context.Context, conn *sql.Conn) (tokenSource, error) {
	var epoch int64
	err := conn.QueryRowContext(ctx, sqlReadEpoch).Scan(&epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return tokenSource{}, fmt.Errorf("read token epoch: %w", err)
	}
	epoch++
	if _, err := conn.ExecContext(ctx, sqlWriteEpoch, epoch); err != nil {
		return tokenSource{}, fmt.Errorf("write token epoch: %w", err)
	}
	return tokenSource{epoch: epoch}, nil
}

// renewTokens moves to a new epoch, in a transaction of its own, once the
// current one is half used.
func (w *writer) renewTokens() error {
	if w.tokens.n < tokenRenewAt {
		return nil
	}
	ts, err := nextEpoch(context.Background(), w.conn)
	if err != nil {
		return err
	}
	w.tokens = ts
	return nil
}
