package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// inserter inserts jobs: plain ones in one round trip, alone or in
// rounds shared with other calls (insertfast.go, combine.go), the others
// in a transaction that also creates their queues (create.go), decides
// duplicates and copies them into the lanes of their queues' consumer
// groups.
type inserter struct {
	*db
	*beliefs
	flow    *flowControl
	groups  *consumerGroups
	combine *combiner
}

// combiner gathers the fast inserts (insertFast) of concurrent calls into
// shared rounds, each one statement and one commit. A call queues itself
// and then either leads a round, when fewer than combineLeaders rounds are
// under way, taking every call waiting (its own among them) up to
// maxFastInsert jobs, or waits for the round that took it. Calls that
// come while the rounds are busy wait for the next, so the rounds grow
// with the load: a lone caller leads its own round with no hand-off to
// another goroutine; fifty share a few.
//
// Every call keeps its own all-or-none: a round that fails leaves nothing
// written and answers each of its calls with the failure, and a round that
// the fast insert refuses (errNotFast, say because one call's id exists)
// sends each of its calls back to insert alone.
type combiner struct {
	calls   chan *combinedCall
	leaders chan struct{}   // one per round under way
	ctx     context.Context // the store's: rounds outlive the calls that lead them
}

// combineLeaders is how many rounds may be under way at once: enough to
// overlap one round's commit with the next round's statement, few enough
// that rounds stay large and the pool keeps connections for the rest.
const combineLeaders = 4

// combinedCall is one call of JobInsertMany waiting for a round.
type combinedCall struct {
	ctx   context.Context
	jobs  []store.JobInsertParams
	now   time.Time
	reply chan combinedReply
}

type combinedReply struct {
	out []store.InsertResult
	// shared is set when the call went in a round with others.
	shared bool
	err    error
}

func newCombiner(ctx context.Context) *combiner {
	return &combiner{calls: make(chan *combinedCall, 4096), leaders: make(chan struct{}, combineLeaders), ctx: ctx}
}

// sqlInsertJobsWith opens the common table expressions of sqlInsertJobs
// and sqlInsertJobsFast: ins inserts the jobs given as arrays, skipping
// ids that exist, and returns what follows it.
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

// insertArgs are the arguments of sqlInsertJobs for some jobs.
type insertArgs struct {
	ids       []string
	queueOf   []string // the queue of each job
	runAts    []time.Time
	queues    []string // the queues of the jobs, each once
	available []string // the queues of the jobs inserted available
	// allProcess is set when every job is of process durability.
	allProcess bool
	// args are sqlInsertJobs' $1 to $25.
	args []any
}

// newInsertArgs builds the arguments that insert the jobs at idx at now,
// with the wait deadlines of the maximum waits waits.
func newInsertArgs(jobs []store.JobInsertParams, idx []int, now time.Time, waits map[string]time.Duration) (*insertArgs, error) {
	n := len(idx)
	var (
		ids, queues, kinds, states, bkinds, ukeys, tags, durs = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		groups, traceParents        = make([]string, n), make([]string, n)
		ungrouped                   []string // queues of the jobs without a group
		distinct                    []string // queues of the jobs
		anyGroup, anyCreated        bool
		anyTraced, anyWait          bool
		deadlines                   = make([]pgtype.Timestamptz, n)
		created                     = make([]pgtype.Timestamptz, n)
		payloads                    = make([][]byte, n)
		prios, maxAtt               = make([]int32, n), make([]int32, n)
		runAts                      = make([]time.Time, n)
		bases, maxes, leases, ufors = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		jitters                     = make([]float64, n)
		availableQueues             []string
	)
	for k, i := range idx {
		jp := &jobs[i]
		ids[k], queues[k], kinds[k], states[k] = jp.ID, jp.Queue, jp.Kind, string(jp.State)
		payloads[k] = bytesOrNil(jp.Payload)
		prios[k], maxAtt[k] = int32(jp.Priority), int32(jp.MaxAttempts)
		runAts[k] = micro(jp.RunAt)
		bkinds[k], bases[k], maxes[k], jitters[k] = string(jp.Backoff.Kind), int64(jp.Backoff.Base), int64(jp.Backoff.Max), jp.Backoff.Jitter
		leases[k], ukeys[k], ufors[k] = int64(jp.LeaseDuration), jp.UniqueKey, int64(jp.UniqueFor)
		durs[k] = string(durabilityOf(jp.Durability))
		if !slices.Contains(distinct, jp.Queue) {
			distinct = append(distinct, jp.Queue)
		}
		if created[k] = tstz(jp.CreatedAt); created[k].Valid {
			anyCreated = true
		}
		if traceParents[k] = jp.TraceParent; jp.TraceParent != "" {
			anyTraced = true
		}
		if deadlines[k] = waitDeadline(0, runAts[k], waits[jp.Queue]); deadlines[k].Valid {
			anyWait = true
		}
		if groups[k] = jp.Group; jp.Group != "" {
			anyGroup = true
		} else if !slices.Contains(ungrouped, jp.Queue) {
			ungrouped = append(ungrouped, jp.Queue)
		}
		var err error
		if tags[k], err = encodeTags(jp.ID, jp.Tags); err != nil {
			return nil, err
		}
		if jp.State == job.StateAvailable && !slices.Contains(availableQueues, jp.Queue) {
			availableQueues = append(availableQueues, jp.Queue)
		}
	}
	groupsArg := any(groups)
	if !anyGroup {
		groupsArg = nil // no job has a group: unnest reads NULL as none for each
	}
	createdArg := any(created)
	if !anyCreated {
		createdArg = nil // every job is created now: unnest reads NULL for each
	}
	tracedArg := any(traceParents)
	if !anyTraced {
		tracedArg = nil // no job has a traceparent: unnest reads NULL for each
	}
	deadlinesArg := any(deadlines)
	if !anyWait {
		deadlinesArg = nil // no job has a deadline: unnest reads NULL for each
	}
	return &insertArgs{
		ids: ids, queueOf: queues, runAts: runAts, queues: distinct, available: availableQueues,
		allProcess: allProcess(n, func(k int) job.Durability { return job.Durability(durs[k]) }),
		args: []any{ids, queues, kinds, payloads, prios, states, runAts, maxAtt, bkinds, bases, maxes,
			jitters, leases, ukeys, ufors, tags, durs, now, groupsArg, ungrouped, createdArg, distinct, tracedArg,
			deadlinesArg, believedWaits(distinct, waits)},
	}, nil
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

// newJob is the job jp as inserted at now: created then, unless it says
// when.
func newJob(jp *store.JobInsertParams, runAt, now time.Time) *job.Job {
	return store.NewJob(jp, runAt, createdAt(jp, now), durabilityOf(jp.Durability))
}

// createdAt is when jp is created, inserted at now: then, unless it says
// when.
func createdAt(jp *store.JobInsertParams, now time.Time) time.Time {
	if jp.CreatedAt.IsZero() {
		return now
	}
	return micro(jp.CreatedAt)
}
