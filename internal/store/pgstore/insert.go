package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	// sqlInsertJobs inserts jobs (sqlInsertJobsWith) and creates their
	// queues. It returns a row (id, NULL, NULL) for each job it inserted,
	// a row (queue, name, NULL) for each consumer group of the queues $22,
	// read in the snapshot of the insert (see lanes.go), and a row (queue,
	// NULL, wait) for each of them whose maximum wait is not the one of
	// $25 that the deadlines believed (see deadline.go).
	sqlInsertJobs = sqlInsertJobsWith + `id, queue
), q AS (
	INSERT INTO spool_queues (name) SELECT DISTINCT queue FROM ins ON CONFLICT (name) DO NOTHING
)
SELECT id, NULL::text, NULL::int8 FROM ins
UNION ALL
SELECT queue, name, NULL FROM spool_consumer_groups WHERE queue = ANY($22::text[])
UNION ALL
SELECT name, NULL, max_wait_ns FROM (` + waitMismatch + `) w`
	// sqlDoneByIDs finds ids that belong to finished jobs. It runs as its
	// own statement after the insert so that it sees a job that another
	// transaction moved to spool_jobs_done while the insert waited on it.
	sqlDoneByIDs = doneSelect + ` WHERE d.id = ANY($1)`
	sqlHotByIDs  = hotSelect + ` WHERE j.id = ANY($1)`
	sqlUndoIDs   = `DELETE FROM spool_jobs WHERE id = ANY($1)`
	sqlJobsByIDs = `SELECT * FROM (` + hotSelect + ` WHERE j.id = ANY($1) UNION ALL ` + doneSelect + ` WHERE d.id = ANY($1)) x`
	// sqlLockUnique serialises inserts of the same unique keys; $1 is
	// sorted so that two batches never wait on each other in a cycle.
	sqlLockUnique = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) WITH ORDINALITY AS u(k, ord) ORDER BY ord`
	// sqlNewestUnique reads, for each (queue, key), the newest job with
	// that key in either table.
	sqlNewestUnique = `SELECT x.* FROM unnest($1::text[], $2::text[]) AS k(queue, key)
CROSS JOIN LATERAL (
	SELECT * FROM (
		(` + hotSelect + ` WHERE j.queue = k.queue AND j.unique_key = k.key ORDER BY j.seq DESC LIMIT 1)
		UNION ALL
		(` + doneSelect + ` WHERE d.queue = k.queue AND d.unique_key = k.key ORDER BY d.seq DESC LIMIT 1)
	) y ORDER BY y.seq DESC LIMIT 1) x`
)

// JobInsertMany inserts p.Jobs atomically; see store.Inserter. Plain jobs
// take the fast insert (insertfast.go); the others, and those it sends
// back, a transaction that creates the queues of p.Create first
// (create.go) and then inserts them (insert). A job of a durability other
// than full or process is refused with an error wrapping a
// *job.InputError, failing the whole insert.
func (ins *inserter) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	if err := checkInserts(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	now := micro(p.Now)
	if len(p.Create) == 0 && ins.canInsertFast(p.Jobs) {
		out, err := ins.insertPlain(ctx, p.Jobs, now)
		if !errors.Is(err, errNotFast) {
			return out, wrap("insert jobs", err)
		}
	}
	var out []store.InsertResult
	err := ins.tx(ctx, func(tx pgx.Tx) error {
		if err := ins.createQueues(ctx, tx, p.Create); err != nil {
			return err
		}
		var err error
		out, err = ins.insert(ctx, tx, p.Jobs, now, len(p.Create) == 0)
		return err
	})
	if err != nil {
		return nil, wrap("insert jobs", err)
	}
	return out, nil
}

// insert inserts jps in tx: it marks the queues that get a group grouped
// (markGrouped), decides which jobs are duplicates (store.PlanInserts,
// reading what they may duplicate only when one has a unique key),
// inserts the others and copies them into their queues' consumer groups.
// With relax, tx commits without waiting for the WAL flush when every job
// inserted is of process durability: a caller whose transaction writes
// more than the insert passes false.
func (ins *inserter) insert(ctx context.Context, tx pgx.Tx, jps []store.JobInsertParams, now time.Time, relax bool) ([]store.InsertResult, error) {
	if err := ins.flow.markGrouped(ctx, tx, withGroups(jps)); err != nil {
		return nil, err
	}
	var byID map[string]*job.Job
	var newest map[store.UniqueRef]*job.Job
	if slices.ContainsFunc(jps, func(jp store.JobInsertParams) bool { return jp.UniqueKey != "" }) {
		var err error
		if byID, newest, err = ins.lookUpDuplicates(ctx, tx, jps); err != nil {
			return nil, err
		}
	}
	out := make([]store.InsertResult, len(jps))
	plan, err := store.PlanInserts(jps, byID, newest, now, out)
	if err != nil {
		return nil, err
	}
	if len(plan.Insert) > 0 {
		if err := ins.insertRows(ctx, tx, jps, plan.Insert, now, relax, out); err != nil {
			return nil, err
		}
	}
	if err := plan.SettleDuplicates(jps, out); err != nil {
		return nil, err
	}
	return out, nil
}

// insertRows inserts the jobs of jps at idx, fills their results, and
// turns into duplicates those whose id turned out to exist; relax is
// insert's.
func (ins *inserter) insertRows(ctx context.Context, tx pgx.Tx, jps []store.JobInsertParams, idx []int, now time.Time, relax bool,
	out []store.InsertResult) error {
	waits, err := ins.waiting(ctx, tx)
	if err != nil {
		return err
	}
	a, err := newJobArrays(newJobs(jps, idx, now), now)
	if err != nil {
		return err
	}
	batch := &pgx.Batch{}
	if relax && a.allProcess {
		batch.Queue(sqlRelaxCommit)
	}
	batch.Queue(sqlLockFlowShared, a.queues, lockClass)
	inserted := make(map[string]bool, len(idx))
	var lanes laneSet                   // the consumer groups of the jobs' queues
	var actual map[string]time.Duration // the maximum waits the deadlines did not believe
	var key string                      // a job's id, or a queue's name
	var group *string                   // the name of a consumer group of queue key
	var wait *int64                     // the maximum wait of queue key
	batch.Queue(sqlInsertJobs, a.insertArgs(now, waits)...).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&key, &group, &wait}, func() error {
			switch {
			case group != nil:
				lanes.add(key, *group)
				ins.lanedQueues.Store(key, struct{}{})
			case wait != nil:
				if actual == nil {
					actual = make(map[string]time.Duration)
				}
				actual[key] = time.Duration(*wait)
			default:
				inserted[key] = true
			}
			return nil
		})
		return err
	})
	existing := make(map[string]*job.Job)
	batch.Queue(sqlDoneByIDs, a.ids).Query(func(rows pgx.Rows) error { return scanInto(rows, existing) })
	ins.announceOnCommit(tx, a.available)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	var undo, missing []string
	for _, id := range a.ids {
		if inserted[id] && existing[id] != nil {
			undo = append(undo, id) // the id was finished while we inserted it
			delete(inserted, id)
		} else if !inserted[id] && existing[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(actual) > 0 {
		ins.forgetWaits()
		if err := fixWaits(ctx, tx, a.ids, a.queueOf, a.runAts, actual, func(id string) bool { return inserted[id] }); err != nil {
			return err
		}
	}
	// The jobs inserted into queues with consumer groups, and the queues
	// of those available.
	var copied, available []string
	for _, j := range a.jobs {
		if inserted[j.ID] && len(lanes[j.Queue]) > 0 {
			copied = append(copied, j.ID)
			if j.State == job.StateAvailable {
				available = appendOnce(available, j.Queue)
			}
		}
	}
	batch = &pgx.Batch{}
	if len(undo) > 0 {
		batch.Queue(sqlUndoIDs, undo)
	}
	if len(missing) > 0 {
		batch.Queue(sqlHotByIDs, missing).Query(func(rows pgx.Rows) error { return scanInto(rows, existing) })
	}
	ins.groups.copyToLanes(tx, batch, lanes, copied, available)
	if batch.Len() > 0 {
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("settle the inserted jobs: %w", err)
		}
	}
	for k, i := range idx {
		j := a.jobs[k]
		if inserted[j.ID] {
			out[i] = store.InsertResult{Job: j}
			continue
		}
		dup := existing[j.ID]
		if dup == nil {
			return fmt.Errorf("insert job %s: neither inserted nor found", j.ID)
		}
		if err := job.DuplicateByID(dup, j.Queue, fmt.Sprintf("jobs[%d].id", i)); err != nil {
			return err
		}
		out[i] = store.InsertResult{Job: dup, Duplicate: true}
	}
	return nil
}

// lookUpDuplicates reads what jps, a batch with unique keys, may
// duplicate: the jobs of its ids and the newest job of each of its
// queues' keys. It locks the batch's keys first so that racing inserts of
// one key resolve one after the other.
func (ins *inserter) lookUpDuplicates(ctx context.Context, tx pgx.Tx, jps []store.JobInsertParams) (map[string]*job.Job, map[store.UniqueRef]*job.Job, error) {
	var locks []int64
	var refQueues, refKeys, ids []string
	seen := make(map[store.UniqueRef]bool)
	for i := range jps {
		ids = append(ids, jps[i].ID)
		r := store.UniqueRef{Queue: jps[i].Queue, Key: jps[i].UniqueKey}
		if r.Key == "" || seen[r] {
			continue
		}
		seen[r] = true
		refQueues, refKeys = append(refQueues, r.Queue), append(refKeys, r.Key)
		h := fnv.New64a()
		_, _ = h.Write([]byte(ins.schema + "/" + r.Queue + "/" + r.Key))
		locks = append(locks, int64(h.Sum64()))
	}
	slices.Sort(locks)
	byID := make(map[string]*job.Job)
	newest := make(map[store.UniqueRef]*job.Job)
	batch := &pgx.Batch{}
	batch.Queue(sqlLockUnique, slices.Compact(locks))
	batch.Queue(sqlJobsByIDs, ids).Query(func(rows pgx.Rows) error { return scanInto(rows, byID) })
	batch.Queue(sqlNewestUnique, refQueues, refKeys).Query(func(rows pgx.Rows) error {
		found, _, err := scanJobs(rows)
		for _, j := range found {
			newest[store.UniqueRef{Queue: j.Queue, Key: j.UniqueKey}] = j
		}
		return err
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, fmt.Errorf("look up duplicates: %w", err)
	}
	return byID, newest, nil
}

// scanInto reads rows of jobs into byID.
func scanInto(rows pgx.Rows, byID map[string]*job.Job) error {
	found, _, err := scanJobs(rows)
	for _, j := range found {
		byID[j.ID] = j
	}
	return err
}
