package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
)

// tokenSource hands out fencing tokens. A token is epoch<<32 | n: the
// epoch is stored in the database and moves on at every open (and after
// 2^31 hand-outs), so every token of a process is higher than every token
// of the processes before it, crashed ones included, whose hand-outs were
// never written. Tokens stay below 2^53 for the first two million epochs,
// so clients that read JSON numbers as doubles see them exactly.
//
// A memory store takes the tokens of the durable store beside it (see
// Config.TokensFrom): one source for both, so that no token is handed out
// twice in a process, and one stored epoch, so that a memory job enqueued
// after a restart never gets a token a worker of the old process holds.
type tokenSource struct {
	// last is the latest token handed out: the epoch in its high bits,
	// the count of the epoch's hand-outs in its low 32.
	last atomic.Int64
}

// tokenRenewAt is the count of hand-outs after which the writer moves to a
// new epoch before its next batch.
const tokenRenewAt = 1 << 31

// take returns the next token.
func (t *tokenSource) take() int64 { return t.last.Add(1) }

// due reports whether the source should move to a new epoch.
func (t *tokenSource) due() bool { return t.last.Load()&(1<<32-1) >= tokenRenewAt }

// start makes epoch the current one, counting from its first token.
func (t *tokenSource) start(epoch int64) { t.last.Store(epoch << 32) }

const (
	sqlReadEpoch  = `SELECT value FROM meta WHERE key = 'epoch'`
	sqlWriteEpoch = `INSERT INTO meta (key, value) VALUES ('epoch', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`
)

// nextEpoch moves the stored epoch on by one, durably, and returns it.
func nextEpoch(ctx context.Context, conn *sql.Conn) (int64, error) {
	var epoch int64
	err := conn.QueryRowContext(ctx, sqlReadEpoch).Scan(&epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read token epoch: %w", err)
	}
	epoch++
	if _, err := conn.ExecContext(ctx, sqlWriteEpoch, epoch); err != nil {
		return 0, fmt.Errorf("write token epoch: %w", err)
	}
	return epoch, nil
}
