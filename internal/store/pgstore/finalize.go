package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// finisher ends attempts: it acknowledges, fails and releases leased
// jobs, and extends their leases and records their progress.
type finisher struct {
	*db
	letters *deadLetters
}

// The leases of the jobs a statement ended go by an array of their seqs
// (seq = ANY (ARRAY(…))), never by IN (SELECT …), which the planner may
// join to spool_leases in a nested loop over the whole CTE for each lease.
const (
	// sqlComplete moves the items whose token is current to
	// spool_jobs_done in state $5 (cancel requested) or $6 (see
	// ackCancelled), ends their leases, turns synchronous_commit off for
	// its transaction when every job it moved is of process durability,
	// and announces the queues with an active cap among theirs (see
	// sqlNotifyCapped).
	sqlComplete = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[]) AS i(id, token, result)
), gone AS (
	DELETE FROM spool_jobs j USING i
	WHERE j.id = i.id AND j.lease_token = i.token AND j.state = 'active'
	RETURNING ` + hotColumns + `, i.result AS new_result
), lease AS (
	DELETE FROM spool_leases WHERE seq = ANY (ARRAY(SELECT seq FROM gone))
), moved AS (
	` + doneInsert + `
	SELECT seq, id, queue, kind, payload, priority, CASE WHEN cancel_requested THEN $5::text ELSE $6::text END,
		run_at, attempt, max_attempts, backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key,
		unique_for, tags, new_result, errors, progress, lease_token, cancel_requested, created_at, started_at, $4::timestamptz,
		durability, grp, dead_letter_of_queue, dead_letter_of_id, worker, traceparent
	FROM gone
	RETURNING id, queue, state, durability, kind, attempt, started_at
), relax AS (
	SELECT CASE WHEN bool_and(durability = 'process') THEN set_config('synchronous_commit', 'off', true) END AS relaxed
	FROM moved
), wake AS (
	SELECT count(pg_notify($7, $8 || ' ' || names)) AS sent FROM (
		SELECT string_agg(name, ',') AS names FROM (
			SELECT name, (row_number() OVER (ORDER BY name) - 1) / $9 AS chunk FROM spool_queues
			WHERE name IN (SELECT queue FROM moved) AND (max_active > 0 OR group_max_active > 0)) c
		GROUP BY chunk) n
)
SELECT id, queue, state, kind, attempt, started_at FROM moved CROSS JOIN relax CROSS JOIN wake`
	// sqlLockLeased locks the active jobs whose token is current, in seq
	// order so that two batches never wait on each other in a cycle, with
	// what the rules and the writes need.
	sqlLockLeased = `SELECT i.ord, j.seq, j.queue, j.cancel_requested, j.attempt, j.max_attempts, j.run_at, j.lease_ns,
	j.backoff_kind, j.backoff_base, j.backoff_max, j.backoff_jitter, j.durability, COALESCE(q.dead_letter_queue, ''),
	COALESCE(q.max_wait_ns, 0), j.kind, j.started_at, j.dead_letter_of_id IS NOT NULL, j.errors, COALESCE(j.grp, ''),
	COALESCE(q.ordered, false)
FROM unnest($1::text[], $2::int8[]) WITH ORDINALITY AS i(id, token, ord)
JOIN spool_jobs j ON j.id = i.id AND j.lease_token = i.token AND j.state = 'active'
LEFT JOIN spool_queues q ON q.name = j.queue
ORDER BY j.seq
FOR UPDATE OF j`
	// sqlRequeue sends active jobs back to wait with a run time, an
	// attempt count, a wait deadline and, unless empty, a new error history,
	// and ends their leases.
	sqlRequeue = `WITH u AS (
	SELECT * FROM unnest($1::int8[], $2::text[], $3::timestamptz[], $4::int4[], $5::text[], $6::timestamptz[])
		AS u(seq, state, run_at, attempt, err, wait_until)
), up AS (
	UPDATE spool_jobs j SET state = u.state, run_at = u.run_at, attempt = u.attempt, wait_until = u.wait_until,
		errors = CASE WHEN u.err = '' THEN j.errors ELSE u.err::jsonb END
	FROM u WHERE j.seq = u.seq
	RETURNING j.seq
)
DELETE FROM spool_leases WHERE seq = ANY (ARRAY(SELECT seq FROM up))`
	sqlExtend = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[]) AS i(id, token, lease_ns)
)
UPDATE spool_leases l
SET expires_at = $4::timestamptz + ((CASE WHEN i.lease_ns > 0 THEN i.lease_ns ELSE j.lease_ns END) / 1000) * interval '1 microsecond'
FROM spool_jobs j JOIN i ON j.id = i.id AND j.lease_token = i.token AND j.state = 'active'
WHERE l.seq = j.seq
RETURNING i.id, j.queue, j.cancel_requested, l.expires_at`
	sqlProgress = `UPDATE spool_jobs SET progress = $3 WHERE id = $1 AND lease_token = $2 AND state = 'active'`
	// sqlNotifyCapped announces on channel $1 as node $2, at most $3 names
	// a notification, those of the queues $4 with an active cap, where a
	// job that stops being active frees a place for fetches parked on
	// other nodes; other queues take no notification lock.
	sqlNotifyCapped = `SELECT pg_notify($1, $2 || ' ' || string_agg(name, ',')) FROM (
	SELECT name, (row_number() OVER (ORDER BY name) - 1) / $3 AS chunk FROM spool_queues
	WHERE name = ANY($4) AND (max_active > 0 OR group_max_active > 0)) c
GROUP BY chunk`
	// sqlKnownIDs tells which of the ids exist, in either table.
	sqlKnownIDs = `SELECT id FROM spool_jobs WHERE id = ANY($1) UNION ALL SELECT id FROM spool_jobs_done WHERE id = ANY($1)`
)

// ackCancelled and ackCompleted are job.AfterCompletion's two answers,
// between which sqlComplete picks per row.
var (
	ackCancelled = string(job.AfterCompletion(true))
	ackCompleted = string(job.AfterCompletion(false))
)

// batchOf is the attempt.Batch of items, named by key.
func batchOf[T any](items []T, key func(*T) (string, int64)) *attempt.Batch {
	return attempt.NewBatch(len(items), func(i int) (string, int64) { return key(&items[i]) })
}

// settle fills the outcomes of the items of b that no row matched
// (attempt.Miss: whether the job exists) and of its repeats.
func settle(ctx context.Context, q querier, b *attempt.Batch, out []job.Outcome, matched []bool) error {
	var missing []string
	for k, ok := range matched {
		if !ok {
			missing = append(missing, b.IDs[k])
		}
	}
	known := make(map[string]bool, len(missing))
	if len(missing) > 0 {
		ids, err := collect[string](ctx, q, sqlKnownIDs, missing)
		if err != nil {
			return fmt.Errorf("look up jobs: %w", err)
		}
		for _, id := range ids {
			known[id] = true
		}
	}
	for k, ok := range matched {
		if !ok {
			out[b.Pos[k]] = job.Outcome{Err: attempt.Miss(known[b.IDs[k]])}
		}
	}
	b.Repeats(func(i int) error { return out[i].Err }, func(i int, err error) { out[i] = job.Outcome{Err: err} })
	return nil
}

// JobComplete acknowledges jobs item by item, each where
// job.AfterCompletion sends it, in one statement (sqlComplete); see
// store.Claimer.
func (fin *finisher) JobComplete(ctx context.Context, p *store.JobCompleteParams) ([]job.Outcome, error) {
	it := batchOf(p.Items, store.CompleteKey)
	results := make([][]byte, len(it.Pos))
	for k, i := range it.Pos {
		results[k] = bytesOrNil(p.Items[i].Result)
	}
	out := make([]job.Outcome, len(p.Items))
	complete := func(q querier) error {
		matched, err := fin.complete(ctx, q, it, results, micro(p.Now), out)
		if err != nil {
			return err
		}
		return settle(ctx, q, it, out, matched)
	}
	var err error
	if fin.beforeCommit == nil {
		err = fin.retry(ctx, func() error { return fin.timed(func() error { return complete(fin.pool) }) })
	} else {
		err = fin.tx(ctx, func(tx pgx.Tx) error { return complete(tx) })
	}
	if err != nil {
		return nil, wrap("complete jobs", err)
	}
	return out, nil
}

// complete acknowledges through q, at now, the items of it whose token is
// current, with results, fills their outcomes in out and reports which
// items matched.
func (fin *finisher) complete(ctx context.Context, q querier, it *attempt.Batch, results [][]byte, now time.Time, out []job.Outcome) ([]bool, error) {
	rows, err := q.Query(ctx, sqlComplete, it.IDs, it.Tokens, results, now, ackCancelled, ackCompleted,
		fin.channel, fin.node, notifyChunk)
	if err != nil {
		return nil, err
	}
	matched := make([]bool, len(it.IDs))
	var id, state string
	var att int32
	var startedAt *time.Time
	var o job.Outcome
	_, err = pgx.ForEachRow(rows, []any{&id, &o.Queue, &state, &o.Kind, &att, &startedAt}, func() error {
		k := it.Index(id)
		matched[k] = true
		o.State, o.Attempt, o.StartedAt = job.State(state), int(att), utc(startedAt)
		out[it.Pos[k]] = o
		return nil
	})
	return matched, err
}

// leased is a locked job whose attempt a fail, release or rescue ends.
type leased struct {
	attempt.Held
	seq        int64
	runAt      time.Time
	durability job.Durability
	// settings are the queue's, as far as the lock reads them.
	settings job.QueueSettings
	// errors is the job's errors column.
	errors []byte
	// run is what a return of runs needs of the job.
	run runMember
}

// lockLeased locks the active jobs of it whose token is current and
// returns them by item. With waits, it first takes the flow locks of
// their queues shared, so that the maximum waits it reads hold until tx
// ends (see deadline.go).
func lockLeased(ctx context.Context, tx pgx.Tx, it *attempt.Batch, waits bool) (map[int]*leased, error) {
	batch := &pgx.Batch{}
	if waits {
		batch.Queue(sqlLockFlowOfJobs, it.IDs, lockClass)
	}
	found := make(map[int]*leased)
	batch.Queue(sqlLockLeased, it.IDs, it.Tokens).Query(func(rows pgx.Rows) error {
		var (
			ord                          int64
			l                            leased
			att, maxAtt                  int32
			leaseNS, base, maxD, maxWait int64
			kind, durability             string
			startedAt                    *time.Time
		)
		_, err := pgx.ForEachRow(rows, []any{&ord, &l.seq, &l.Queue, &l.CancelRequested, &att, &maxAtt, &l.runAt,
			&leaseNS, &kind, &base, &maxD, &l.Backoff.Jitter, &durability, &l.settings.DeadLetterQueue, &maxWait,
			&l.Kind, &startedAt, &l.Letter, &l.errors, &l.run.group, &l.run.ordered}, func() error {
			c := l
			c.errors = slices.Clone(l.errors)
			c.StartedAt = utc(startedAt)
			c.Attempt, c.MaxAttempts = int(att), int(maxAtt)
			c.durability = job.Durability(durability)
			c.runAt = c.runAt.UTC()
			c.Backoff.Kind, c.Backoff.Base, c.Backoff.Max = job.BackoffKind(kind), time.Duration(base), time.Duration(maxD)
			c.settings.MaxWait = time.Duration(maxWait)
			found[int(ord)-1] = &c
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("lock jobs: %w", err)
	}
	return found, nil
}

// change is where one locked job goes, as end says: a final state (moved
// to spool_jobs_done) or back to wait in spool_jobs.
type change struct {
	seq   int64
	queue string
	end   attempt.End
	// runAt is the job's run time, which a retry replaces.
	runAt time.Time
	// errors is the job's errors column, to which the end may add.
	errors []byte
	// durability is the job's level when known; empty counts as full.
	durability job.Durability
	// maxWait is the queue's, which dates a job that waits unstarted
	// again (job.WaitDeadline).
	maxWait time.Duration
}

// changeOf is the change end makes to l, a new run time cut to what the
// database keeps.
func (l *leased) changeOf(end attempt.End) change {
	end.RunAt = micro(end.RunAt)
	return change{seq: l.seq, queue: l.Queue, end: end, runAt: l.runAt, errors: l.errors, durability: l.durability,
		maxWait: l.settings.MaxWait}
}

// apply carries out changes in tx at now and returns, by the seq of each
// job that died into a dead-letter queue, its copy there (deadLetters).
// The queues in which jobs became available are announced and, when the
// changes ended leases (freed), the other queues with an active cap. When
// every change is to a process job, tx commits without waiting for the
// WAL flush.
func (fin *finisher) apply(ctx context.Context, tx pgx.Tx, changes []change, now time.Time, freed bool) (map[int64]job.JobRef, error) {
	var fSeq, wSeq []int64
	var fState, wState, fErr, wErr []string
	var fAtt, wAtt []int32
	var wRun []time.Time
	var wWait []pgtype.Timestamptz
	var available, capped []string
	var letters map[int64]string
	for _, c := range changes {
		if c.end.Available() {
			available = appendOnce(available, c.queue)
		}
		if c.end.DeadLetter != "" {
			if letters == nil {
				letters = make(map[int64]string)
			}
			letters[c.seq] = c.end.DeadLetter
		}
		var errs string
		if c.end.Record {
			var err error
			if errs, err = appendError(c.errors, c.end.Error); err != nil {
				return nil, err
			}
		}
		state, att := string(c.end.State), int32(c.end.Attempt)
		if c.end.State.Final() {
			fSeq, fState, fAtt, fErr = append(fSeq, c.seq), append(fState, state), append(fAtt, att), append(fErr, errs)
			continue
		}
		runAt := c.runAt
		if !c.end.RunAt.IsZero() {
			runAt = c.end.RunAt
		}
		wSeq, wState, wAtt, wErr = append(wSeq, c.seq), append(wState, state), append(wAtt, att), append(wErr, errs)
		wRun, wWait = append(wRun, runAt), append(wWait, waitDeadline(c.end.Attempt, runAt, c.maxWait))
	}
	if freed {
		for _, c := range changes {
			if !slices.Contains(available, c.queue) {
				capped = appendOnce(capped, c.queue)
			}
		}
	}
	batch := &pgx.Batch{}
	if allProcess(len(changes), func(i int) job.Durability { return changes[i].durability }) {
		batch.Queue(sqlRelaxCommit)
	}
	if len(fSeq) > 0 {
		batch.Queue(sqlFinish, fSeq, fState, fAtt, fErr, now)
	}
	if len(wSeq) > 0 {
		batch.Queue(sqlRequeue, wSeq, wState, wRun, wAtt, wErr, wWait)
	}
	fin.announceOnCommit(tx, available)
	if len(capped) > 0 {
		batch.Queue(sqlNotifyCapped, fin.channel, fin.node, notifyChunk, capped)
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("apply changes: %w", err)
	}
	return fin.letters.write(ctx, tx, letters, now)
}

// endAll applies changes, each ending a lease, in tx at now, and reports
// by change the dead-letter copies it made.
func (fin *finisher) endAll(ctx context.Context, tx pgx.Tx, changes []change, now time.Time, letter func(k int, ref job.JobRef)) error {
	letters, err := fin.apply(ctx, tx, changes, now, true)
	for k := range changes {
		if ref, ok := letters[changes[k].seq]; ok {
			letter(k, ref)
		}
	}
	return err
}

// JobFail records failed attempts item by item, each where
// job.AfterFailure sends it; see store.Claimer.
func (fin *finisher) JobFail(ctx context.Context, p *store.JobFailParams) ([]job.Outcome, error) {
	now := micro(p.Now)
	return fin.endLeases(ctx, "fail jobs", batchOf(p.Items, store.FailKey), len(p.Items), now, false,
		func(i int, l *leased) attempt.End { return failEnd(&p.Items[i], l, now, p.Rand) })
}

// failEnd is where the failed attempt item of the locked job l goes at
// now (attempt.Fail, rnd giving the jitter).
func failEnd(item *job.FailItem, l *leased, now time.Time, rnd func() float64) attempt.End {
	f := attempt.Failure{NoRetry: item.NoRetry, RetryAfter: item.RetryAfter, Message: item.Message}
	return attempt.Fail(&l.Held, &f, l.settings, now, rnd)
}

// JobRelease hands active jobs back unrun, item by item, each where
// job.AfterRelease sends it; see store.Claimer. A job that counts as
// never started again gets its wait deadline under its queue's flow lock.
func (fin *finisher) JobRelease(ctx context.Context, p *store.JobReleaseParams) ([]job.Outcome, error) {
	return fin.endLeases(ctx, "release jobs", batchOf(p.Items, store.ReleaseKey), len(p.Items), micro(p.Now), true,
		func(_ int, l *leased) attempt.End { return attempt.Release(&l.Held) })
}

// endLeases locks the leased jobs of it, n items in all (with waits, as
// lockLeased does), and ends each lease as end decides for item i; what
// names the call in errors.
func (fin *finisher) endLeases(ctx context.Context, what string, it *attempt.Batch, n int, now time.Time, waits bool,
	end func(i int, l *leased) attempt.End) ([]job.Outcome, error) {
	var out []job.Outcome
	err := fin.tx(ctx, func(tx pgx.Tx) error {
		out = make([]job.Outcome, n)
		locked, err := lockLeased(ctx, tx, it, waits)
		if err != nil {
			return err
		}
		matched := make([]bool, len(it.IDs))
		changes := make([]change, 0, len(locked))
		members := make([]runMember, 0, len(locked))
		positions := make([]int, 0, len(locked))
		for k, i := range it.Pos {
			if l := locked[k]; l != nil {
				matched[k] = true
				changes, positions = append(changes, l.changeOf(end(i, l))), append(positions, i)
				members = append(members, l.run)
				out[i] = store.EndOutcome(&l.Held, &changes[len(changes)-1].end)
			}
		}
		changes, dropped, err := withRunReturns(ctx, tx, changes, members)
		if err != nil {
			return err
		}
		positions = keptPositions(positions, dropped, out)
		if err := fin.endAll(ctx, tx, changes, now, func(k int, ref job.JobRef) {
			if k < len(positions) {
				out[positions[k]].DeadLetter = ref
			}
		}); err != nil {
			return err
		}
		return settle(ctx, tx, it, out, matched)
	})
	if err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// keptPositions is the item positions of the changes withRunReturns
// kept, the items of those it dropped answered as leases lost.
func keptPositions(positions []int, dropped []bool, out []job.Outcome) []int {
	if dropped == nil {
		return positions
	}
	kept := positions[:0:0]
	for k, i := range positions {
		if dropped[k] {
			out[i] = job.Outcome{Err: job.ErrLeaseLost}
			continue
		}
		kept = append(kept, i)
	}
	return kept
}

// JobExtend moves leases forward item by item, rewriting only their lease
// rows; see store.Claimer.
func (fin *finisher) JobExtend(ctx context.Context, p *store.JobExtendParams) ([]job.Outcome, error) {
	it := batchOf(p.Items, store.ExtendKey)
	leases := make([]int64, len(it.Pos))
	for k, i := range it.Pos {
		leases[k] = int64(p.Items[i].Lease)
	}
	out := make([]job.Outcome, len(p.Items))
	err := fin.retry(ctx, func() error {
		rows, err := fin.pool.Query(ctx, sqlExtend, it.IDs, it.Tokens, leases, micro(p.Now))
		if err != nil {
			return err
		}
		matched := make([]bool, len(it.IDs))
		var id, queue string
		var cancel bool
		var expires time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &queue, &cancel, &expires}, func() error {
			k := it.Index(id)
			matched[k] = true
			out[it.Pos[k]] = store.Extended(queue, expires.UTC(), cancel)
			return nil
		})
		if err != nil {
			return err
		}
		return settle(ctx, fin.pool, it, out, matched)
	})
	if err != nil {
		return nil, wrap("extend leases", err)
	}
	return out, nil
}

// JobProgress stores a progress report of an active job; see
// store.Claimer.
func (fin *finisher) JobProgress(ctx context.Context, p *store.JobProgressParams) error {
	if err := fin.check(); err != nil {
		return wrap("report progress", err)
	}
	tag, err := fin.pool.Exec(ctx, sqlProgress, p.ID, p.Token, bytesOrNil(p.Progress))
	if err != nil {
		return wrap("report progress", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	out := make([]job.Outcome, 1)
	it := attempt.NewBatch(1, func(int) (string, int64) { return p.ID, p.Token })
	if err := settle(ctx, fin.pool, it, out, []bool{false}); err != nil {
		return wrap("report progress", err)
	}
	return fmt.Errorf("report progress: job %s: %w", p.ID, out[0].Err)
}
