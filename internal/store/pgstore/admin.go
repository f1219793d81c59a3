package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/adminkit"
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
	// sqlLockDone locks a finished job and reads its queue's maximum
	// wait.
	sqlLockDone = `SELECT d.seq, d.queue, d.state, d.attempt, COALESCE(q.max_wait_ns, 0)
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
	sqlDeleteDone     = `DELETE FROM spool_jobs_done WHERE seq = $1`
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
	j, err := getJob(ctx, a.pool, id)
	if err != nil {
		return nil, wrap(fmt.Sprintf("get job %s", id), err)
	}
	return j, nil
}

// getJob reads job id through q, or returns job.ErrNotFound.
func getJob(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id string) (*job.Job, error) {
	j, _, err := scanJob(q.QueryRow(ctx, sqlJobByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, job.ErrNotFound
	}
	return j, err
}

// lockedJob is a job locked in spool_jobs or, when done, in
// spool_jobs_done, with its queue's maximum wait.
type lockedJob struct {
	seq     int64
	queue   string
	state   job.State
	attempt int
	maxWait time.Duration
	done    bool
}

// jobAction is how onJob runs an action on one job: what names it in
// errors, flowLock takes the flow lock of the job's queue shared first,
// read reads the job as the action leaves it.
type jobAction struct {
	what           string
	flowLock, read bool
}

// onJob runs act on job id, locked (lockJob) in one transaction, as c
// says.
func (a *admin) onJob(ctx context.Context, id string, c jobAction, act func(tx pgx.Tx, r lockedJob) error) (*job.Job, error) {
	var out *job.Job
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if c.flowLock {
			if _, err := tx.Exec(ctx, sqlLockFlowOfJobs, []string{id}, lockClass); err != nil {
				return fmt.Errorf("lock queue: %w", err)
			}
		}
		r, err := lockJob(ctx, tx, id)
		if err == nil {
			err = act(tx, r)
		}
		if err == nil && c.read {
			out, err = getJob(ctx, tx, id)
		}
		return err
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("%s job %s", c.what, id), err)
	}
	return out, nil
}

// lockJob locks job id in spool_jobs, or else in spool_jobs_done, or
// returns job.ErrNotFound.
func lockJob(ctx context.Context, tx pgx.Tx, id string) (r lockedJob, err error) {
	var state string
	var attempt int32
	var maxWait int64
	dest := []any{&r.seq, &r.queue, &state, &attempt, &maxWait}
	err = tx.QueryRow(ctx, sqlLockHot, id).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		r.done = true
		err = tx.QueryRow(ctx, sqlLockDone, id).Scan(dest...)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return r, job.ErrNotFound
	}
	r.state, r.attempt, r.maxWait = job.State(state), int(attempt), time.Duration(maxWait)
	return r, err
}

// notifyFreed announces r's queue, in tx, when removing r frees its group
// in an ordered queue: r holds the group (job.HoldsGroup) and is not
// active (an active job ends through an ack or fail, which announce the
// freed place).
func (a *admin) notifyFreed(ctx context.Context, tx pgx.Tx, r lockedJob) error {
	if r.state == job.StateActive || !job.HoldsGroup(r.state, r.attempt) {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlNotifyOrdered, a.channel, a.node, r.queue); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// JobCancel cancels a job as job.CancelOf decides; see store.Admin.
// Cancelling a waiting job that held its group in an ordered queue wakes
// the fetches parked on the queue on other nodes.
func (a *admin) JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return a.onJob(ctx, id, jobAction{what: "cancel", read: true}, func(tx pgx.Tx, r lockedJob) error {
		switch cancel, err := job.CancelOf(r.state); {
		case err != nil:
			return err
		case cancel == job.CancelRequest:
			_, err := tx.Exec(ctx, sqlCancelActive, r.seq)
			return err
		case cancel == job.CancelNow:
			// A cancel asks no rule: the job moves as it is, cancelled.
			if _, err := tx.Exec(ctx, sqlFinish, []int64{r.seq}, []string{string(job.StateCancelled)}, []int32{int32(r.attempt)},
				[]string{""}, micro(now)); err != nil {
				return err
			}
			return a.notifyFreed(ctx, tx, r)
		}
		return nil
	})
}

// JobRetry makes a job that job.CheckRetry lets through available now,
// from spool_jobs or spool_jobs_done, wherever its state keeps it; see
// store.Admin. The job waits unstarted again, so it gets its wait
// deadline under its queue's flow lock (see deadline.go).
func (a *admin) JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return a.onJob(ctx, id, jobAction{what: "retry", flowLock: true, read: true}, func(tx pgx.Tx, r lockedJob) error {
		if err := job.CheckRetry(r.state); err != nil {
			return err
		}
		return a.retry(ctx, tx, r.queue, r.done, []int64{r.seq}, now, r.maxWait)
	})
}

// retry makes the jobs of seqs of queue, finished (done) or not,
// available at now with no attempts and the wait deadline of maxWait.
func (a *admin) retry(ctx context.Context, tx pgx.Tx, queue string, done bool, seqs []int64, now time.Time, maxWait time.Duration) error {
	move := sqlRetryHot
	if done {
		move = sqlRetryDone
	}
	now = micro(now)
	if _, err := tx.Exec(ctx, move, seqs, now, waitDeadline(0, now, maxWait)); err != nil {
		return err
	}
	a.announceOnCommit(tx, []string{queue})
	return nil
}

// JobDelete removes a job that job.CheckDelete lets through; see
// store.Admin. Deleting a job that held its group in an ordered queue
// wakes the fetches parked on the queue on other nodes.
func (a *admin) JobDelete(ctx context.Context, id string) error {
	_, err := a.onJob(ctx, id, jobAction{what: "delete"}, func(tx pgx.Tx, r lockedJob) error {
		if err := job.CheckDelete(r.state); err != nil {
			return err
		}
		del := sqlDeleteHot
		if r.done {
			del = sqlDeleteDone
		}
		if _, err := tx.Exec(ctx, del, r.seq); err != nil {
			return err
		}
		return a.notifyFreed(ctx, tx, r)
	})
	return err
}

// JobRetryMany retries every job of one queue in one state that
// job.CheckBulk lets through; see store.Admin.
func (a *admin) JobRetryMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := a.check(); err != nil {
		return 0, wrap("retry jobs", err)
	}
	if err := job.CheckBulk(true, p.State); err != nil {
		return 0, err
	}
	query := sqlRetryManyHot
	if p.State.Final() {
		query = sqlRetryManyDone
	}
	n := 0
	err := a.tx(ctx, func(tx pgx.Tx) error {
		var waits map[string]time.Duration
		batch := &pgx.Batch{}
		lockWaits(batch, []string{p.Queue}, &waits)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		seqs, err := collect[int64](ctx, tx, query, p.Queue, string(p.State))
		if n = len(seqs); err != nil || n == 0 {
			return err
		}
		return a.retry(ctx, tx, p.Queue, p.State.Final(), seqs, p.Now, waits[p.Queue])
	})
	if err != nil {
		return 0, wrap("retry jobs", err)
	}
	return n, nil
}

// JobDeleteMany deletes every job of one queue in one state that
// job.CheckBulk lets through; see store.Admin. Deleting waiting jobs of
// an ordered queue, which may have held their groups, wakes the fetches
// parked on the queue on other nodes.
func (a *admin) JobDeleteMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := a.check(); err != nil {
		return 0, wrap("delete jobs", err)
	}
	if err := job.CheckBulk(false, p.State); err != nil {
		return 0, err
	}
	del := sqlDeleteManyHot
	if p.State.Final() {
		del = sqlDeleteManyDone
	}
	n := 0
	err := a.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, del, p.Queue, string(p.State))
		if n = int(tag.RowsAffected()); err != nil || n == 0 || p.State.Final() {
			return err
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
	if err := adminkit.CheckDurability(d, false, "with PostgreSQL: every node must see every job"); err != nil {
		return fmt.Errorf("set queue durability: %w", err)
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
