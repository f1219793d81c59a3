package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// checkpointer copies the WAL into the database file on a connection of
// its own, beside the writer. Left to SQLite, the commit that takes the
// WAL past its limit copies it there and then, on the writer's goroutine:
// every thousand pages the writer stops for a copy and an fsync of the
// database file. Here the writer only commits; the checkpointer runs
// passive checkpoints, which never block a commit or a read. A checkpoint
// copies the frames committed before it began, so under steady writes the
// WAL never empties on its own: once it has grown past walResetFrames the
// writer checkpoints the rest itself, between two batches, after which its
// next commit starts the WAL over. The checkpointer's connection syncs as
// the writer's does, so a frame leaves the WAL only once the database file
// holds it on disk.
type checkpointer struct {
	db     *sql.DB
	logger *slog.Logger
	kick   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	// behind is set when the WAL holds more than walResetFrames frames:
	// the writer then checkpoints between batches.
	behind atomic.Bool
	runs   atomic.Int64 // checkpoints run, for tests
}

const (
	// checkpointPause spaces the background checkpoints, so that each
	// copies many commits.
	checkpointPause = 20 * time.Millisecond
	// walResetFrames is the WAL's size, in pages, past which the writer
	// checkpoints itself to start the WAL over.
	walResetFrames = 4096
)

// newCheckpointer opens the checkpointer's connection to the database at
// path, syncing as sync says, and starts it.
func newCheckpointer(path, sync string, logger *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open("sqlite3", dsn(path, sync, false))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	c := &checkpointer{
		db: db, logger: logger,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go c.run()
	return c, nil
}

// nudge tells the checkpointer that a commit added to the WAL.
func (c *checkpointer) nudge() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		}
		frames, _, err := checkpoint(context.Background(), c.db.QueryRowContext)
		c.runs.Add(1)
		if err != nil {
			c.logger.Warn("sqlitestore: background checkpoint failed", "err", err)
		}
		c.behind.Store(frames > walResetFrames)
		select {
		case <-c.quit:
			return
		case <-time.After(checkpointPause):
		}
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	close(c.quit)
	<-c.done
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("close checkpoint connection: %w", err)
	}
	return nil
}

// checkpoint runs a passive checkpoint through query and returns the
// frames in the WAL and how many of them the database file now holds.
func checkpoint(ctx context.Context, query func(context.Context, string, ...any) *sql.Row) (frames, copied int64, err error) {
	var busy int
	if err := query(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return 0, 0, fmt.Errorf("checkpoint: %w", err)
	}
	return frames, copied, nil
}
