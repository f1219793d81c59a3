package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// admin reads, lists, cancels, retries and deletes jobs, imports them,
// and pauses, purges and configures queues.
type admin struct {
	*db
	*beliefs
}

const (
	sqlJobByID = `SELECT * FROM (` + hotSelect + ` WHERE j.id = $1 UNION ALL ` + doneSelect + ` WHERE d.id = $1) x LIMIT 1`
	// sqlLockHot locks a pending job and reads its queue's maximum wait.
	sqlLockHot = `SELECT j.seq, j.queue, j.state, j.attempt, COALESCE(q.max_wait_ns, 0)
FROM spool_jobs j LEFT JOIN spool_queues q ON q.name = j.queue WHERE j.id = $1 FOR UPDATE OF j`
	// sqlDoneState locks a finished job and reads its queue's maximum
	// wait.
	sqlDoneState = `SELECT d.seq, d.state, COALESCE(q.max_wait_ns, 0)
FROM spool_jobs_done d LEFT JOIN spool_queues q ON q.name = d.queue WHERE d.id = $1 FOR UPDATE OF d`
	sqlCancelActive = `UPDATE spool_jobs SET cancel_requested = true WHERE seq = $1`
	// sqlRetryHot makes waiting jobs available now ($2) with no attempts
	// and the wait deadline $3.
	sqlRetryHot = `UPDATE spool_jobs SET state = 'available', attempt = 0, run_at = $2, finished_at = NULL,
	cancel_requested = false, wait_until = $3
WHERE seq = ANY($1)`
	// sqlRetryDone moves finished jobs back to spool_jobs, available now
	// ($2) with no attempts and the wait deadline $3, keeping their seq
	// (so their place in enqueue order), their errors and their group; a
	// job without one gets the empty group in a queue with flow control,
	// whose flow lock the transaction holds (see flow.go).
	sqlRetryDone = `WITH flow AS (
	SELECT ARRAY(SELECT name FROM spool_queues WHERE flow AND name IN (
		SELECT queue FROM spool_jobs_done WHERE seq = ANY($1))) AS names
), gone AS (
	DELETE FROM spool_jobs_done WHERE seq = ANY($1) RETURNING ` + jobColumns + `
), back AS (
	INSERT INTO spool_jobs (` + jobColumns + `, wait_until)
	SELECT seq, id, queue, kind, payload, priority, 'available', $2, 0, max_attempts, backoff_kind, backoff_base,
		backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, result, errors, progress, lease_token,
		false, created_at, started_at, NULL, durability,
		CASE WHEN grp IS NOT NULL THEN grp WHEN queue = ANY(flow.names) THEN '' END, dead_letter_of_queue, dead_letter_of_id,
		worker, traceparent, $3::timestamptz
	FROM gone CROSS JOIN flow
	RETURNING seq
)
SELECT count(*) FROM back`
	sqlRetryManyHot   = `SELECT seq FROM spool_jobs WHERE queue = $1 AND state = $2 FOR UPDATE`
	sqlRetryManyDone  = `SELECT seq FROM spool_jobs_done WHERE queue = $1 AND state = $2 FOR UPDATE`
	sqlDeleteHot      = `DELETE FROM spool_jobs WHERE seq = $1`
	sqlDeleteDone     = `DELETE FROM spool_jobs_done WHERE id = $1`
	sqlDeleteManyHot  = `DELETE FROM spool_jobs WHERE queue = $1 AND state = $2`
	sqlDeleteManyDone = `DELETE FROM spool_jobs_done WHERE queue = $1 AND state = $2`
	sqlSetDurability  = `INSERT INTO spool_queues (name, durability) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET durability = excluded.durability`
	sqlPurgeQueue = `DELETE FROM spool_jobs WHERE queue = $1 AND state = 'available'`
	// sqlNotifyOrdered announces queue $3 on channel $1 as node $2 if it is
	// ordered: a job that held one of its groups (job.HoldsGroup) and
	// ends without being active frees the group, which fetches parked on
	// other nodes may take.
	sqlNotifyOrdered = `SELECT pg_notify($1, $2 || ' ' || name) FROM spool_queues WHERE name = $3 AND ordered`
)

// JobGet returns one job or job.ErrNotFound.
func (a *admin) JobGet(ctx context.Context, id string) (*job.Job, error) {
	if err := a.check(); err != nil {
		return nil, wrap("get job", err)
	}
	j, _, err := scanJob(a.pool.QueryRow(ctx, sqlJobByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get job %s: %w", id, job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get job", err)
	}
	return j, nil
}

// getTx reads one job inside tx.
func getTx(ctx context.Context, tx pgx.Tx, id string) (*job.Job, error) {
	j, _, err := scanJob(tx.QueryRow(ctx, sqlJobByID, id))
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, nil
}

// hotRow is a locked row of spool_jobs, with its queue's maximum wait.
type hotRow struct {
	seq     int64
	queue   string
	state   job.State
	attempt int
	maxWait time.Duration
}

// freesGroup reports whether removing r from spool_jobs frees its group
// in an ordered queue: it holds the group and is not active (an active
// job ends through an ack or fail, which announce the freed place).
func (r hotRow) freesGroup() bool {
	return r.state != job.StateActive && job.HoldsGroup(r.state, r.attempt)
}

// lockHot locks job id in spool_jobs. found is false when it is not there
// (it is finished, or unknown).
func lockHot(ctx context.Context, tx pgx.Tx, id string) (r hotRow, found bool, err error) {
	var state string
	var attempt int32
	var maxWait int64
	err = tx.QueryRow(ctx, sqlLockHot, id).Scan(&r.seq, &r.queue, &state, &attempt, &maxWait)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	r.state, r.attempt, r.maxWait = job.State(state), int(attempt), time.Duration(maxWait)
	return r, err == nil, err
}

// notifyFreed announces r's queue, in tx, when removing r frees its group
// (see hotRow.freesGroup) in an ordered queue.
func (a *admin) notifyFreed(ctx context.Context, tx pgx.Tx, r hotRow) error {
	if !r.freesGroup() {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlNotifyOrdered, a.channel, a.node, r.queue); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// doneState locks a finished job and returns its seq, its state and its
// queue's maximum wait, or job.ErrNotFound.
func doneState(ctx context.Context, tx pgx.Tx, id string) (int64, job.State, time.Duration, error) {
	var seq, maxWait int64
	var state string
	err := tx.QueryRow(ctx, sqlDoneState, id).Scan(&seq, &state, &maxWait)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", 0, job.ErrNotFound
	}
	return seq, job.State(state), time.Duration(maxWait), err
}

// JobCancel cancels a job; see store.Admin. Cancelling a waiting job
// that held its group in an ordered queue wakes the fetches parked on the
// queue on other nodes.
func (a *admin) JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	var out *job.Job
	err := a.tx(ctx, func(tx pgx.Tx) error {
		r, found, err := lockHot(ctx, tx, id)
		if err != nil {
			return err
		}
		if !found {
			_, st, _, err := doneState(ctx, tx, id)
			if err != nil {
				return err
			}
			if st != job.StateCancelled {
				return fmt.Errorf("job is %s: %w", st, job.ErrInvalidState)
			}
		} else if r.state == job.StateActive {
			if _, err := tx.Exec(ctx, sqlCancelActive, r.seq); err != nil {
				return err
			}
		} else {
			// A cancel asks no rule: the job moves as it is, cancelled.
			if _, err := tx.Exec(ctx, sqlFinish, []int64{r.seq}, []string{string(job.StateCancelled)}, []int32{int32(r.attempt)},
				[]string{""}, micro(now)); err != nil {
				return err
			}
			if err := a.notifyFreed(ctx, tx, r); err != nil {
				return err
			}
		}
		out, err = getTx(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("cancel job %s", id), err)
	}
	return out, nil
}

// JobRetry makes a job that job.State.Retryable lets through available
// now, from spool_jobs or spool_jobs_done, wherever its state keeps it;
// see store.Admin. The job waits unstarted again, so it gets its wait
// deadline under its queue's flow lock (see waits.go).
func (a *admin) JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	var out *job.Job
	now = micro(now)
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockFlowOfJobs, []string{id}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		r, found, err := lockHot(ctx, tx, id)
		if err != nil {
			return err
		}
		if found {
			if !r.state.Retryable() {
				return fmt.Errorf("job is %s: %w", r.state, job.ErrInvalidState)
			}
			if _, err := tx.Exec(ctx, sqlRetryHot, []int64{r.seq}, now, waitDeadline(0, now, r.maxWait)); err != nil {
				return err
			}
		} else {
			seq, st, maxWait, err := doneState(ctx, tx, id)
			if err != nil {
				return err
			}
			if !st.Retryable() {
				return fmt.Errorf("job is %s: %w", st, job.ErrInvalidState)
			}
			if _, err := tx.Exec(ctx, sqlRetryDone, []int64{seq}, now, waitDeadline(0, now, maxWait)); err != nil {
				return err
			}
		}
		if out, err = getTx(ctx, tx, id); err != nil {
			return err
		}
		a.announceOnCommit(tx, []string{out.Queue})
		return nil
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("retry job %s", id), err)
	}
	return out, nil
}

// JobDelete removes a job that is not active; see store.Admin. Deleting
// a job that held its group in an ordered queue wakes the fetches parked
// on the queue on other nodes.
func (a *admin) JobDelete(ctx context.Context, id string) error {
	err := a.tx(ctx, func(tx pgx.Tx) error {
		r, found, err := lockHot(ctx, tx, id)
		if err != nil {
			return err
		}
		if found {
			if r.state == job.StateActive {
				return fmt.Errorf("job is active, cancel it first: %w", job.ErrInvalidState)
			}
			if _, err := tx.Exec(ctx, sqlDeleteHot, r.seq); err != nil {
				return err
			}
			return a.notifyFreed(ctx, tx, r)
		}
		tag, err := tx.Exec(ctx, sqlDeleteDone, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return job.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return wrap(fmt.Sprintf("delete job %s", id), err)
	}
	return nil
}

// JobRetryMany retries every job of one queue in one state; see
// store.Admin.
func (a *admin) JobRetryMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := a.check(); err != nil {
		return 0, wrap("retry jobs", err)
	}
	if !p.State.Retryable() {
		return 0, fmt.Errorf("retry jobs in state %q: %w", p.State, job.ErrInvalidState)
	}
	query, move := sqlRetryManyHot, sqlRetryHot
	if p.State.Final() {
		query, move = sqlRetryManyDone, sqlRetryDone
	}
	n := 0
	now := micro(p.Now)
	err := a.tx(ctx, func(tx pgx.Tx) error {
		var waits map[string]time.Duration
		batch := &pgx.Batch{}
		lockWaits(batch, []string{p.Queue}, &waits)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		seqs, err := collect[int64](ctx, tx, query, p.Queue, string(p.State))
		if err != nil || len(seqs) == 0 {
			n = 0
			return err
		}
		if _, err := tx.Exec(ctx, move, seqs, now, waitDeadline(0, now, waits[p.Queue])); err != nil {
			return err
		}
		n = len(seqs)
		a.announceOnCommit(tx, []string{p.Queue})
		return nil
	})
	if err != nil {
		return 0, wrap("retry jobs", err)
	}
	return n, nil
}

// JobDeleteMany deletes every job of one queue in one state but active;
// see store.Admin. Deleting waiting jobs of an ordered queue, which may
// have held their groups, wakes the fetches parked on the queue on other
// nodes.
func (a *admin) JobDeleteMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := a.check(); err != nil {
		return 0, wrap("delete jobs", err)
	}
	if p.State == job.StateActive || !p.State.Valid() {
		return 0, fmt.Errorf("delete jobs in state %q: %w", p.State, job.ErrInvalidState)
	}
	if p.State.Final() {
		tag, err := a.pool.Exec(ctx, sqlDeleteManyDone, p.Queue, string(p.State))
		if err != nil {
			return 0, wrap("delete jobs", err)
		}
		return int(tag.RowsAffected()), nil
	}
	n := 0
	err := a.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sqlDeleteManyHot, p.Queue, string(p.State))
		if err != nil {
			return err
		}
		if n = int(tag.RowsAffected()); n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlNotifyOrdered, a.channel, a.node, p.Queue); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, wrap("delete jobs", err)
	}
	return n, nil
}

// QueueSetPaused pauses or resumes a queue, creating it if unknown, and
// the lanes of its consumer groups with it; see store.Admin. A resume
// wakes the fetches parked on them on every node.
func (a *admin) QueueSetPaused(ctx context.Context, name string, paused bool) error {
	err := a.tx(ctx, func(tx pgx.Tx) error {
		// The queue's row stays locked until the commit, and a group's
		// creation locks it to read the pause its lane takes, so the lanes
		// read next are all there are.
		if _, err := tx.Exec(ctx, sqlSetPaused, name, paused); err != nil {
			return err
		}
		names, err := withLanes(ctx, tx, name)
		if err != nil {
			return err
		}
		for _, lane := range names[1:] {
			if _, err := tx.Exec(ctx, sqlSetPaused, lane, paused); err != nil {
				return fmt.Errorf("pause lane %s: %w", lane, err)
			}
		}
		if paused {
			return nil
		}
		a.announceOnCommit(tx, names)
		return nil
	})
	if err != nil {
		return wrap("set queue paused", err)
	}
	return nil
}

// QueueSetDurability sets the durability of jobs later enqueued into a
// queue without their own, creating the queue if unknown; see store.Admin.
// Every level is stored, memory included, but a job that takes memory
// from its queue is then refused by JobInsertMany like any memory job. An
// unknown level is an error wrapping a *job.InputError.
func (a *admin) QueueSetDurability(ctx context.Context, name string, d job.Durability) error {
	switch d {
	case job.DurabilityFull, job.DurabilityProcess:
	case job.DurabilityMemory:
		return fmt.Errorf("set queue durability: %w", job.Invalid("durability",
			"memory durability is not available with PostgreSQL: every node must see every job"))
	default:
		return fmt.Errorf("set queue durability: %w", job.Invalid("durability", "must be full, process or memory"))
	}
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlSetDurability, name, string(d)); err != nil {
			return err
		}
		return a.notify(ctx, tx, settingsTag, []string{name})
	})
	a.defaults.forget([]string{name})
	if err != nil {
		return wrap("set queue durability", err)
	}
	return nil
}

// QueuePurge deletes a queue's available jobs; see store.Admin.
func (a *admin) QueuePurge(ctx context.Context, name string) (int, error) {
	if err := a.check(); err != nil {
		return 0, wrap("purge queue", err)
	}
	tag, err := a.pool.Exec(ctx, sqlPurgeQueue, name)
	if err != nil {
		return 0, wrap("purge queue", err)
	}
	return int(tag.RowsAffected()), nil
}
