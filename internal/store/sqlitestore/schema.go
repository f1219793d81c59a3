package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// migration is one step of the schema: SQL, then, when set, a Go step in
// the same transaction.
type migration struct {
	sql  string
	then func(ctx context.Context, conn *sql.Conn) error
}

// migrations are applied in order at Open; PRAGMA user_version records how
// many have run. Never edit a released migration: append a new one.
var migrations = []migration{
	{sql: `
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
`},
	{sql: `
DROP INDEX jobs_state;
ALTER TABLE jobs ADD COLUMN durability TEXT NOT NULL DEFAULT 'full';
ALTER TABLE queues ADD COLUMN durability TEXT NOT NULL DEFAULT 'full';
CREATE TABLE meta (
	key   TEXT    PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;
`},
	// The fields packed into spec (see spec.go) keep their old columns,
	// which new rows set to zeros.
	{sql: `ALTER TABLE jobs ADD COLUMN spec BLOB;`, then: fillSpecs},
	// Cron schedules (schedule.go); times in unix nanoseconds.
	{sql: `
CREATE TABLE schedules (
	name         TEXT    PRIMARY KEY,
	cron         TEXT    NOT NULL,
	timezone     TEXT    NOT NULL,
	every_ns     INTEGER NOT NULL,
	misfire      TEXT    NOT NULL,
	max_catch_up INTEGER NOT NULL,
	job          BLOB    NOT NULL,
	paused       INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	last_tick    INTEGER NOT NULL,
	last_run_at  INTEGER,
	last_job_id  TEXT,
	next_run_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE paused = 0 AND next_run_at IS NOT NULL;
`},
	// Flow control (flowstate.go, refill.go): each job's group, each queue's limits and
	// whether its jobs have groups; the claim order of the queues claimed
	// by group apart from the others', over the rows marked gready (every
	// available one, and ones that left that state since the last sweep);
	// the rate logs kept over a restart.
	{sql: `
CREATE TABLE rate_logs (
	queue  TEXT NOT NULL,
	grp    TEXT,
	starts BLOB NOT NULL
);
ALTER TABLE jobs ADD COLUMN grp TEXT;
ALTER TABLE jobs ADD COLUMN gready INTEGER DEFAULT 1;
ALTER TABLE queues ADD COLUMN limits BLOB;
ALTER TABLE queues ADD COLUMN grouped INTEGER NOT NULL DEFAULT 0;
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, seq) WHERE state = 'available' AND grp IS NULL;
CREATE INDEX jobs_group_claim ON jobs (queue, grp, priority DESC, run_at, seq) WHERE gready = 1 AND grp IS NOT NULL;
CREATE TRIGGER jobs_group_ready AFTER UPDATE OF state, grp ON jobs
WHEN NEW.state = 'available' AND NEW.grp IS NOT NULL AND NEW.gready IS NOT 1
BEGIN
	UPDATE jobs SET gready = 1 WHERE seq = NEW.seq;
END;
`},
	// Queue settings (queuerow.go): each queue's settings, and the moment
	// from which each job of a queue with a maximum wait may no longer
	// start (wait_until, NULL elsewhere), indexed while the job waits
	// unstarted so that the sweep of jobs past their wait reads only
	// those (see expire.go).
	{sql: `
ALTER TABLE queues ADD COLUMN settings BLOB;
ALTER TABLE jobs ADD COLUMN wait_until INTEGER;
CREATE INDEX jobs_wait ON jobs (wait_until) WHERE wait_until IS NOT NULL AND state = 'available' AND attempt = 0;
`},
	// Consumer groups (lanes.go): the groups of each queue.
	{sql: `
CREATE TABLE consumer_groups (
	queue      TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (queue, name)
) WITHOUT ROWID;
`},
	// The worker that leased each job last (job.Job.Worker; NULL for
	// none): written with the outcome of each attempt, as the rest of a
	// lease is (lease.go). No index: the jobs a worker holds are the
	// leases in memory. A job's traceparent needs no column: it is given
	// at insert and never changes, so it goes in the spec (version 3,
	// see spec.go).
	{sql: `ALTER TABLE jobs ADD COLUMN worker TEXT;`},
	// The dashboard's login sessions (session.go): the SHA-256 of each
	// session's id, its token and its times, in unix nanoseconds.
	{sql: `
CREATE TABLE sessions (
	id_hash     TEXT    PRIMARY KEY,
	token_name  TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_token ON sessions (token_name, created_at, id_hash);
CREATE INDEX sessions_expiry ON sessions (expires_at);
`},
	// The jobs of ordered queues that were handed out and wait to go out
	// again (ordered.go's holds): a claim reads them without reading the
	// queue's waiting jobs. Only retries enter it, never a first attempt,
	// whose row says attempt 0 until it ends.
	{sql: `CREATE INDEX jobs_held ON jobs (queue, seq) WHERE attempt > 0 AND grp IS NOT NULL AND ` + condHeld + `;`},
}

// Partial-index conditions, repeated verbatim in queries so that SQLite's
// planner can prove the query implies the index's WHERE clause. Queries
// that must use one index name it (INDEXED BY): without statistics the
// planner would often choose another index and sort.
const (
	condDue = `(state = 'scheduled' OR state = 'retrying')`
	// condHeld is the waiting states of a job that may hold its group.
	condHeld = `state IN ('scheduled', 'available', 'retrying')`
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
		m := migrations[i]
		_, err := conn.ExecContext(ctx, m.sql)
		if err == nil && m.then != nil {
			err = m.then(ctx, conn)
		}
		if err != nil {
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

// fillSpecs writes the spec column of every job from the columns that held
// its fields before, a chunk of rows at a time.
func fillSpecs(ctx context.Context, conn *sql.Conn) error {
	const chunk = 1000
	type row struct {
		seq  int64
		spec []byte
	}
	for after := int64(0); ; {
		rows, err := conn.QueryContext(ctx, `SELECT seq, kind, max_attempts, backoff_kind, backoff_base, backoff_max,
	backoff_jitter, lease_ns, unique_for, tags, created_at, durability FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`, after, chunk)
		if err != nil {
			return fmt.Errorf("read jobs for their spec: %w", err)
		}
		var got []row
		for rows.Next() {
			var (
				r                                row
				s                                spec
				maxAttempts, base, most, leaseNS int64
				uniqueFor                        int64
				backoffKind, durability          string
				tags                             sql.NullString
			)
			if err := rows.Scan(&r.seq, &s.kind, &maxAttempts, &backoffKind, &base, &most, &s.backoff.Jitter, &leaseNS,
				&uniqueFor, &tags, &s.createdAt, &durability); err != nil {
				rows.Close()
				return fmt.Errorf("read jobs for their spec: %w", err)
			}
			s.maxAttempts, s.leaseFor, s.uniqueFor = int(maxAttempts), time.Duration(leaseNS), time.Duration(uniqueFor)
			s.backoff.Kind, s.backoff.Base, s.backoff.Max = job.BackoffKind(backoffKind), time.Duration(base), time.Duration(most)
			s.durability = job.Durability(durability)
			if tags.Valid {
				if err := json.Unmarshal([]byte(tags.String), &s.tags); err != nil {
					rows.Close()
					return fmt.Errorf("decode tags of the job with seq %d: %w", r.seq, err)
				}
			}
			r.spec = appendSpec(nil, &s)
			got = append(got, r)
		}
		if err := closeRows(rows); err != nil {
			return fmt.Errorf("read jobs for their spec: %w", err)
		}
		for _, r := range got {
			if _, err := conn.ExecContext(ctx, `UPDATE jobs SET spec = ? WHERE seq = ?`, r.spec, r.seq); err != nil {
				return fmt.Errorf("write spec of the job with seq %d: %w", r.seq, err)
			}
		}
		if len(got) < chunk {
			return nil
		}
		after = got[len(got)-1].seq
	}
}
