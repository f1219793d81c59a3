package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// inserter inserts jobs: plain ones in one round trip, alone or in rounds
// shared by concurrent calls (insertfast.go, combine.go), the others in a
// transaction.
type inserter struct {
	*db
	*beliefs
	flow    *flowControl
	groups  *consumerGroups
	combine *combiner
}

const (
	// sqlInsertJobsWith opens the statements that insert jobs given as
	// jobArrays.insertArgs: ins inserts them in array order, which makes
	// their seqs enqueue order, skipping ids that exist, and returns what
	// follows. A job without a group gets the empty group in the queues of
	// $20 with flow control, whose flow locks the transaction holds.
	sqlInsertJobsWith = `WITH flow AS (
	SELECT ARRAY(SELECT name FROM spool_queues WHERE name = ANY($20::text[]) AND flow) AS names
), ins AS (
	INSERT INTO spool_jobs (id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, durability, grp, created_at,
		traceparent, wait_until)
	SELECT id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, NULLIF(unique_key, ''), unique_for, NULLIF(tags, '')::jsonb,
		durability, CASE WHEN grp <> '' THEN grp WHEN queue = ANY(flow.names) THEN '' END, COALESCE(created_at, $18),
		NULLIF(traceparent, ''), wait_until
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::int4[], $6::text[], $7::timestamptz[],
		$8::int4[], $9::text[], $10::int8[], $11::int8[], $12::float8[], $13::int8[], $14::text[], $15::int8[], $16::text[],
		$17::text[], $19::text[], $21::timestamptz[], $23::text[], $24::timestamptz[])
		WITH ORDINALITY AS u(id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, durability, grp, created_at,
		traceparent, wait_until, ord)
	CROSS JOIN flow
	ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING `
	// sqlInsertJobs inserts jobs and creates their queues. It returns
	// (id, NULL, NULL) for each job it inserted, (queue, name, NULL) for
	// each consumer group of the queues $22 in the insert's snapshot
	// (lanes.go), and (queue, NULL, wait) for each of them whose maximum
	// wait is not the one believed, $25 (deadline.go).
	sqlInsertJobs = sqlInsertJobsWith + `id, queue
), q AS (
	INSERT INTO spool_queues (name) SELECT DISTINCT queue FROM ins ON CONFLICT (name) DO NOTHING
)
SELECT id, NULL::text, NULL::int8 FROM ins
UNION ALL
SELECT queue, name, NULL FROM spool_consumer_groups WHERE queue = ANY($22::text[])
UNION ALL
SELECT name, NULL, max_wait_ns FROM (` + waitMismatch + `) w`
	// sqlDoneByIDs reads finished jobs by id, in a statement after the
	// insert, which sees a job moved there while the insert waited on it.
	sqlDoneByIDs = doneSelect + ` WHERE d.id = ANY($1)`
	sqlHotByIDs  = hotSelect + ` WHERE j.id = ANY($1)`
	sqlUndoIDs   = `DELETE FROM spool_jobs WHERE id = ANY($1)`
	sqlJobsByIDs = `SELECT * FROM (` + hotSelect + ` WHERE j.id = ANY($1) UNION ALL ` + doneSelect + ` WHERE d.id = ANY($1)) x`
	// sqlLockUnique serialises inserts of the same unique keys; $1 is
	// sorted so that two batches never wait on each other in a cycle.
	sqlLockUnique = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) WITH ORDINALITY AS u(k, ord) ORDER BY ord`
	// sqlNewestUnique reads the newest job of each (queue, key).
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
// back, a transaction that creates p.Create's queues (create.go) and then
// inserts them (insert).
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

// insert inserts jps in tx: it marks the queues that get a group grouped,
// decides the duplicates (store.PlanInserts; what a unique key may
// duplicate is read first) and inserts the others (insertRows). With
// relax, tx commits without waiting for the WAL flush when every job
// inserted is of process durability: a caller whose transaction writes
// more passes false.
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

// insertRows inserts the jobs of jps at idx, fixes their wait deadlines
// when their queues' maximum waits were not the ones believed, copies
// them into their queues' consumer groups and fills their results, as
// duplicates for those whose id turned out to exist; relax is insert's.
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

// lookUpDuplicates reads what jps may duplicate: the jobs of its ids and
// the newest job of each of its unique keys, which it locks first so that
// racing inserts of one key resolve one after the other.
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

// checkInserts refuses jobs this store cannot insert (store.CheckInserts).
func checkInserts(jobs []store.JobInsertParams) error {
	return store.CheckInserts(jobs, job.DurabilityFull)
}

// newJob is the job jp as inserted at now: created then, unless it says
// when.
func newJob(jp *store.JobInsertParams, runAt, now time.Time) *job.Job {
	created := now
	if !jp.CreatedAt.IsZero() {
		created = micro(jp.CreatedAt)
	}
	return store.NewJob(jp, runAt, created, durabilityOf(jp.Durability))
}

// newJobs is the jobs of jps at idx, or all of them when idx is nil, as
// inserted at now.
func newJobs(jps []store.JobInsertParams, idx []int, now time.Time) []*job.Job {
	out := make([]*job.Job, len(jps))
	if idx != nil {
		out = out[:len(idx)]
	}
	for k := range out {
		i := k
		if idx != nil {
			i = idx[k]
		}
		out[k] = newJob(&jps[i], micro(jps[i].RunAt), now)
	}
	return out
}

// jobArrays are jobs as arrays, one a column, as an insert (insertArgs)
// and a write of whole jobs (wholeJobs) take them.
type jobArrays struct {
	jobs         []*job.Job
	ids, queueOf []string
	runAts       []time.Time
	common       []any // $1 to $17
	// groups, created and traces are nil when no job has a value other
	// than none (or the statement's time): unnest reads NULL for each.
	groups, created, traces any
	queues                  []string // of the jobs, each once
	ungrouped               []string // of the jobs without a group, each once
	available               []string // of the jobs available, each once
	allProcess              bool     // every job is of process durability
}

// newJobArrays builds the arrays of jobs stored at now. It refuses a level
// of durability this store does not keep.
func newJobArrays(jobs []*job.Job, now time.Time) (*jobArrays, error) {
	n := len(jobs)
	var (
		ids, queues, kinds, states, bkinds, ukeys, tags, durs = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		groups, traces                 = make([]string, n), make([]string, n)
		payloads                       = make([][]byte, n)
		prios, maxAtt                  = make([]int32, n), make([]int32, n)
		runAts                         = make([]time.Time, n)
		bases, maxes, leases, ufors    = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		jitters                        = make([]float64, n)
		created                        = make([]pgtype.Timestamptz, n)
		anyGroup, anyTraced, anyCreate bool
	)
	a := &jobArrays{jobs: jobs, ids: ids, queueOf: queues, runAts: runAts}
	for i, j := range jobs {
		ids[i], queues[i], kinds[i], states[i] = j.ID, j.Queue, j.Kind, string(j.State)
		payloads[i], prios[i], maxAtt[i], runAts[i] = bytesOrNil(j.Payload), int32(j.Priority), int32(j.MaxAttempts), micro(j.RunAt)
		bkinds[i], bases[i], maxes[i], jitters[i] = string(j.Backoff.Kind), int64(j.Backoff.Base), int64(j.Backoff.Max), j.Backoff.Jitter
		leases[i], ukeys[i], ufors[i] = int64(j.LeaseDuration), j.UniqueKey, int64(j.UniqueFor)
		groups[i], traces[i], created[i] = j.Group, j.TraceParent, tstz(j.CreatedAt)
		anyTraced = anyTraced || j.TraceParent != ""
		anyCreate = anyCreate || !created[i].Time.Equal(now)
		a.queues = appendOnce(a.queues, j.Queue)
		if j.Group != "" {
			anyGroup = true
		} else {
			a.ungrouped = appendOnce(a.ungrouped, j.Queue)
		}
		if j.State == job.StateAvailable {
			a.available = appendOnce(a.available, j.Queue)
		}
		d, kept := job.StoredDurability(j.Durability, job.DurabilityFull)
		if !kept {
			return nil, fmt.Errorf("job %s: %w", j.ID, job.Invalid("durability", "this store does not keep %q jobs", d))
		}
		durs[i] = string(d)
		var err error
		if tags[i], err = encodeTags(j.ID, j.Tags); err != nil {
			return nil, err
		}
	}
	// Room for the rest of sqlInsertJobsFast's arguments.
	a.common = append(make([]any, 0, 27), ids, queues, kinds, payloads, prios, states, runAts, maxAtt, bkinds, bases, maxes,
		jitters, leases, ukeys, ufors, tags, durs)
	a.groups, a.traces, a.created = orNil(groups, anyGroup), orNil(traces, anyTraced), orNil(created, anyCreate)
	a.allProcess = allProcess(n, func(i int) job.Durability { return job.Durability(durs[i]) })
	return a, nil
}

// insertArgs are sqlInsertJobs' $1 to $25: the jobs inserted at now,
// with the wait deadlines of the maximum waits this node believes, waits.
func (a *jobArrays) insertArgs(now time.Time, waits map[string]time.Duration) []any {
	return append(a.common, now, a.groups, a.ungrouped, a.created, a.queues, a.traces, a.deadlines(waits),
		believedWaits(a.queues, waits))
}

// deadlines are the jobs' wait deadlines (job.WaitDeadline) of the
// maximum waits of their queues, waits; nil when no job has one.
func (a *jobArrays) deadlines(waits map[string]time.Duration) any {
	out := make([]pgtype.Timestamptz, len(a.jobs))
	some := false
	for i, j := range a.jobs {
		out[i] = waitDeadline(j.Attempt, a.runAts[i], waits[j.Queue])
		some = some || out[i].Valid
	}
	return orNil(out, some)
}

// orNil is column, or nil when some is unset.
func orNil[T any](column []T, some bool) any {
	if !some {
		return nil
	}
	return column
}

// encodeTags is the tags of job id as stored: JSON, or the empty string
// for none.
func encodeTags(id string, tags []string) (string, error) {
	if len(tags) == 0 {
		return "", nil
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return "", fmt.Errorf("encode tags of job %s: %w", id, err)
	}
	return string(b), nil
}
