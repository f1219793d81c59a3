package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order at Open; PRAGMA user_version records how
// many have run. Never edit a released migration: append a new one.
var migrations = []string{
	`
CREATE TABLE jobs (
	seq              INTEGER PRIMARY KEY,
	id               TEXT    NOT NULL UNIQUE,
	queue            TEXT    NOT NULL,
	kind             TEXT    NOT NULL,
	payload          BLOB,
	priority         INTEGER NOT NULL,
	state            TEXT    NOT NULL,
	run_at           INTEGER NOT NULL,
	attempt          INTEGER NOT NULL DEFAULT 0,
	max_attempts     INTEGER NOT NULL,
	backoff_kind     TEXT    NOT NULL,
	backoff_base     INTEGER NOT NULL,
	backoff_max      INTEGER NOT NULL,
	backoff_jitter   REAL    NOT NULL,
	lease_ns         INTEGER NOT NULL,
	unique_key       TEXT,
	unique_for       INTEGER NOT NULL DEFAULT 0,
	tags             TEXT,
	result           BLOB,
	errors           TEXT,
	progress         BLOB,
	lease_token      INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	created_at       INTEGER NOT NULL,
	started_at       INTEGER,
	finished_at      INTEGER
);
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, seq) WHERE state = 'available';
CREATE INDEX jobs_due ON jobs (run_at) WHERE state = 'scheduled' OR state = 'retrying';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'active';
CREATE INDEX jobs_queue_state ON jobs (queue, state, seq);
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_unique ON jobs (queue, unique_key) WHERE unique_key IS NOT NULL;
CREATE TABLE queues (
	name   TEXT    PRIMARY KEY,
	paused INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
`,
	`
DROP INDEX jobs_state;
ALTER TABLE jobs ADD COLUMN durability TEXT NOT NULL DEFAULT 'full';
ALTER TABLE queues ADD COLUMN durability TEXT NOT NULL DEFAULT 'full';
CREATE TABLE meta (
	key   TEXT    PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;
`,
}

// Partial-index conditions, repeated verbatim in queries so that SQLite's
// planner can prove the query implies the index's WHERE clause. Queries
// that must use one index name it (INDEXED BY): without statistics the
// planner would often choose another index and sort.
const (
	condDue = `(state = 'scheduled' OR state = 'retrying')`
)

// migrate brings the schema of conn up to date in one transaction.
func migrate(ctx context.Context, conn *sql.Conn) error {
	var version int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary knows (%d)", version, len(migrations))
	}
	if version == len(migrations) {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	for i := version; i < len(migrations); i++ {
		if _, err := conn.ExecContext(ctx, migrations[i]); err != nil {
			_, _ = conn.ExecContext(ctx, `ROLLBACK`)
			return fmt.Errorf("apply migration %d: %w", i+1, err)
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		_, _ = conn.ExecContext(ctx, `ROLLBACK`)
		return fmt.Errorf("record schema version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `COMMIT`); err != nil {
		_, _ = conn.ExecContext(ctx, `ROLLBACK`)
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
