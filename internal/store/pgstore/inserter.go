package pgstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// inserter inserts jobs (insert.go): plain ones in one round trip, alone
// or in rounds shared by concurrent calls (insertfast.go, combine.go),
// the others in a transaction that also creates their queues, decides
// their duplicates and copies them into their consumer groups' lanes.
type inserter struct {
	*db
	*beliefs
	flow    *flowControl
	groups  *consumerGroups
	combine *combiner
}

// sqlInsertJobsWith opens the statements that insert jobs given as the
// arrays of jobArrays.insertArgs (sqlInsertJobs, sqlInsertJobsFast): ins
// inserts them in array order, which makes their seqs enqueue order,
// skipping ids that exist, and returns what follows. A job without a
// group gets the empty group in the queues of $20 with flow control,
// whose flow locks the transaction holds (see flow.go).
const sqlInsertJobsWith = `WITH flow AS (
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
	if idx == nil {
		out := make([]*job.Job, len(jps))
		for i := range jps {
			out[i] = newJob(&jps[i], micro(jps[i].RunAt), now)
		}
		return out
	}
	out := make([]*job.Job, len(idx))
	for k, i := range idx {
		out[k] = newJob(&jps[i], micro(jps[i].RunAt), now)
	}
	return out
}

// jobArrays are jobs as the statements that store them over arrays take
// them, one array a column: an insert (insertArgs) and a write of whole
// jobs (wholeJobs) share $1 to $17.
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
