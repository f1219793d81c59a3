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
	// sqlInsertJobs inserts the jobs given as parallel arrays ($1-$17,
	// $19, $21, $23, $24), in array order (which makes their seqs enqueue
	// order), created at $21 or, where that is NULL, at $18, with the
	// traceparents $23 ('' or NULL for none) and the wait deadlines $24
	// (NULL for none), skips ids that already exist, and creates the
	// queues of the jobs it inserted. A job's group ($19) is stored as
	// given; a job without one gets the empty group in the queues with
	// flow control among $20, whose flow lock the transaction holds (see
	// flow.go), and NULL elsewhere. It returns a row (id, NULL, NULL) for
	// each job it inserted, a row (queue, name, NULL) for each consumer
	// group of the queues $22, read in the snapshot of the insert (see
	// lanes.go), and a row (queue, NULL, wait) for each of them whose
	// maximum wait is not the one of $25 that the deadlines believed (see
	// waits.go).
	sqlInsertJobs = sqlInsertCTEs + `SELECT id, NULL::text, NULL::int8 FROM ins
UNION ALL
SELECT queue, name, NULL FROM spool_consumer_groups WHERE queue = ANY($22::text[])
UNION ALL
SELECT name, NULL, max_wait_ns FROM (` + waitMismatch + `) w`
	// sqlInsertCTEs are the common table expressions of sqlInsertJobs:
	// ins inserts the jobs, q their queues.
	sqlInsertCTEs = sqlInsertJobsWith + `id, queue
), q AS (
	INSERT INTO spool_queues (name) SELECT DISTINCT queue FROM ins ON CONFLICT (name) DO NOTHING
)
`
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

// JobInsertMany inserts p.Jobs atomically; see store.Inserter. Each job
// it inserts into a queue with consumer groups gets a copy in each
// group's lane in the same transaction (see lanes.go), and the queues of
// p.Create are created in it first (see create.go). A job with
// a group gives its queue flow control for good (see markGrouped). A job
// of a durability other than full or process is refused with an error
// wrapping a *job.InputError, failing the whole insert. When every job it
// inserts is of process durability, the insert commits without waiting
// for the WAL flush (see sqlRelaxCommit).
func (ins *inserter) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	if err := checkInserts(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if len(p.Create) == 0 && ins.canInsertFast(p.Jobs) {
		out, err := ins.insertPlain(ctx, p.Jobs, micro(p.Now))
		if !errors.Is(err, errNotFast) {
			if err != nil {
				return nil, wrap("insert jobs", err)
			}
			return out, nil
		}
	}
	var out []store.InsertResult
	err := ins.tx(ctx, func(tx pgx.Tx) error {
		if err := ins.createQueues(ctx, tx, p.Create); err != nil {
			return err
		}
		var err error
		out, err = ins.insert(ctx, tx, p.Jobs, micro(p.Now), len(p.Create) == 0)
		return err
	})
	if err != nil {
		return nil, wrap("insert jobs", err)
	}
	return out, nil
}

// insert decides which jobs are duplicates (store.PlanInserts), inserts
// the others and notifies the other nodes of the available ones. With
// relax, tx commits without waiting for the WAL flush when every job
// inserted is of process durability: a caller whose transaction writes
// more than the insert passes false.
func (ins *inserter) insert(ctx context.Context, tx pgx.Tx, jobs []store.JobInsertParams, now time.Time, relax bool) ([]store.InsertResult, error) {
	if err := ins.flow.markGrouped(ctx, tx, withGroups(jobs)); err != nil {
		return nil, err
	}
	var byID map[string]*job.Job
	var newest map[store.UniqueRef]*job.Job
	if slices.ContainsFunc(jobs, func(jp store.JobInsertParams) bool { return jp.UniqueKey != "" }) {
		var err error
		if byID, newest, err = ins.lookUpDuplicates(ctx, tx, jobs); err != nil {
			return nil, err
		}
	}
	out := make([]store.InsertResult, len(jobs))
	plan, err := store.PlanInserts(jobs, byID, newest, now, out)
	if err != nil {
		return nil, err
	}
	if len(plan.Insert) > 0 {
		if err := ins.insertRows(ctx, tx, jobs, plan.Insert, now, relax, out); err != nil {
			return nil, err
		}
	}
	if err := plan.SettleDuplicates(jobs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// insertRows inserts the jobs at idx, fills their results, and turns into
// duplicates those whose id turned out to exist; relax is insert's.
func (ins *inserter) insertRows(ctx context.Context, tx pgx.Tx, jobs []store.JobInsertParams, idx []int, now time.Time, relax bool,
	out []store.InsertResult) error {
	n := len(idx)
	waits, err := ins.waiting(ctx, tx)
	if err != nil {
		return err
	}
	a, err := newInsertArgs(jobs, idx, now, waits)
	if err != nil {
		return err
	}
	ids, runAts := a.ids, a.runAts
	batch := &pgx.Batch{}
	if relax && a.allProcess {
		batch.Queue(sqlRelaxCommit)
	}
	batch.Queue(sqlLockFlowShared, a.queues, lockClass)
	inserted := make(map[string]bool, n)
	var lanes laneSet                   // the consumer groups of the batch's queues
	var actual map[string]time.Duration // the maximum waits the deadlines did not believe
	var key string                      // a job's id, or a queue's
	var group *string                   // the name of a consumer group of queue key
	var wait *int64                     // the maximum wait of queue key
	batch.Queue(sqlInsertJobs, a.args...).Query(func(rows pgx.Rows) error {
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
	var done []*job.Job
	batch.Queue(sqlDoneByIDs, ids).Query(func(rows pgx.Rows) (err error) {
		done, _, err = scanJobs(rows)
		return err
	})
	ins.announceOnCommit(tx, a.available)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	existing := make(map[string]*job.Job)
	var undo []string
	for _, j := range done {
		existing[j.ID] = j
		if inserted[j.ID] {
			undo = append(undo, j.ID) // the id was finished while we inserted it
			delete(inserted, j.ID)
		}
	}
	if len(undo) > 0 {
		if _, err := tx.Exec(ctx, sqlUndoIDs, undo); err != nil {
			return fmt.Errorf("undo duplicate inserts: %w", err)
		}
	}
	if len(actual) > 0 {
		ins.forgetWaits()
		if err := fixWaits(ctx, tx, ids, a.queueOf, runAts, actual, func(id string) bool { return inserted[id] }); err != nil {
			return err
		}
	}
	var missing []string
	for _, id := range ids {
		if !inserted[id] && existing[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, sqlHotByIDs, missing)
		if err != nil {
			return fmt.Errorf("read duplicate jobs: %w", err)
		}
		hot, _, err := scanJobs(rows)
		if err != nil {
			return fmt.Errorf("read duplicate jobs: %w", err)
		}
		for _, j := range hot {
			existing[j.ID] = j
		}
	}
	if len(lanes) > 0 {
		// The inserted jobs of queues with consumer groups, and the queues
		// of the available ones.
		var copied, available []string
		for k, i := range idx {
			if jp := &jobs[i]; inserted[ids[k]] && len(lanes[jp.Queue]) > 0 {
				copied = append(copied, jp.ID)
				if jp.State == job.StateAvailable {
					available = appendOnce(available, jp.Queue)
				}
			}
		}
		batch := &pgx.Batch{}
		ins.groups.copyToLanes(tx, batch, lanes, copied, available)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("copy jobs to their consumer groups: %w", err)
		}
	}
	for k, i := range idx {
		if inserted[ids[k]] {
			out[i] = store.InsertResult{Job: newJob(&jobs[i], runAts[k], now)}
			continue
		}
		dup := existing[ids[k]]
		if dup == nil {
			return fmt.Errorf("insert job %s: neither inserted nor found", ids[k])
		}
		if err := job.DuplicateByID(dup, jobs[i].Queue, fmt.Sprintf("jobs[%d].id", i)); err != nil {
			return err
		}
		out[i] = store.InsertResult{Job: dup, Duplicate: true}
	}
	return nil
}

// lookUpDuplicates reads what a batch with unique keys may duplicate:
// the jobs of its ids and the newest job of each of its queues' keys. It
// locks the batch's keys first so that racing inserts of one key resolve
// one after the other.
func (ins *inserter) lookUpDuplicates(ctx context.Context, tx pgx.Tx, jobs []store.JobInsertParams) (map[string]*job.Job, map[store.UniqueRef]*job.Job, error) {
	var locks []int64
	var refQueues, refKeys []string
	seen := make(map[store.UniqueRef]bool)
	for i := range jobs {
		r := store.UniqueRef{Queue: jobs[i].Queue, Key: jobs[i].UniqueKey}
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
	locks = slices.Compact(locks)
	if _, err := tx.Exec(ctx, sqlLockUnique, locks); err != nil {
		return nil, nil, fmt.Errorf("lock unique keys: %w", err)
	}
	ids := make([]string, len(jobs))
	for i := range jobs {
		ids[i] = jobs[i].ID
	}
	rows, err := tx.Query(ctx, sqlJobsByIDs, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("look up job ids: %w", err)
	}
	found, _, err := scanJobs(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("look up job ids: %w", err)
	}
	byID := make(map[string]*job.Job, len(found))
	for _, j := range found {
		byID[j.ID] = j
	}
	rows, err = tx.Query(ctx, sqlNewestUnique, refQueues, refKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("look up unique keys: %w", err)
	}
	if found, _, err = scanJobs(rows); err != nil {
		return nil, nil, fmt.Errorf("look up unique keys: %w", err)
	}
	newest := make(map[store.UniqueRef]*job.Job, len(found))
	for _, j := range found {
		newest[store.UniqueRef{Queue: j.Queue, Key: j.UniqueKey}] = j
	}
	return byID, newest, nil
}
