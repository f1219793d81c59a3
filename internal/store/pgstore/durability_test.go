package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// commitBundle is a store on one connection whose transactions report the
// synchronous_commit they are about to commit with.
type commitBundle struct {
	t   *testing.T
	s   *Store
	ctx context.Context

	mu       sync.Mutex
	settings []string
}

// setupCommits opens a store whose pool has a single connection, so that
// a setting left behind by one call would show in the next, and reads
// synchronous_commit inside each transaction just before it commits.
func setupCommits(t *testing.T) *commitBundle {
	t.Helper()
	b := &commitBundle{t: t, ctx: context.Background()}
	b.s = open(t, pgtest.Schema(t)+"&pool_max_conns=1")
	b.s.beforeCommit = func(ctx context.Context, tx pgx.Tx) error {
		var v string
		if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&v); err != nil {
			return err
		}
		b.mu.Lock()
		b.settings = append(b.settings, v)
		b.mu.Unlock()
		return nil
	}
	return b
}

// committedWith runs call, which must commit exactly one transaction, and
// returns the synchronous_commit that transaction committed with.
func (b *commitBundle) committedWith(what string, call func() error) string {
	b.t.Helper()
	b.mu.Lock()
	b.settings = nil
	b.mu.Unlock()
	if err := call(); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.settings) != 1 {
		b.t.Fatalf("%s: %d transactions committed, want 1", what, len(b.settings))
	}
	return b.settings[0]
}

// want fails unless call committed with synchronous_commit set to setting.
func (b *commitBundle) want(setting, what string, call func() error) {
	b.t.Helper()
	if got := b.committedWith(what, call); got != setting {
		b.t.Fatalf("%s committed with synchronous_commit %s, want %s", what, got, setting)
	}
}

func newParams(d job.Durability) store.JobInsertParams {
	return store.JobInsertParams{
		ID: job.NewID(t0), Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), State: job.StateAvailable,
		RunAt: t0, MaxAttempts: 3, LeaseDuration: time.Minute, Durability: d,
		Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour},
	}
}

// insert inserts one job of each level and returns their ids.
func (b *commitBundle) insert(levels ...job.Durability) func() error {
	return func() error {
		ps := make([]store.JobInsertParams, len(levels))
		for i, d := range levels {
			ps[i] = newParams(d)
		}
		_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0})
		return err
	}
}

// claim leases every available job, keyed by durability.
func (b *commitBundle) claim() map[job.Durability][]*job.Job {
	b.t.Helper()
	js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 100, Now: t0}))
	if err != nil {
		b.t.Fatal(err)
	}
	out := make(map[job.Durability][]*job.Job)
	for _, j := range js {
		out[j.Durability] = append(out[j.Durability], j)
	}
	return out
}

func (b *commitBundle) complete(js ...*job.Job) func() error {
	return func() error {
		items := make([]job.CompleteItem, len(js))
		for i, j := range js {
			items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
		}
		return accepted(b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: items, Now: t0}))
	}
}

func (b *commitBundle) fail(noRetry bool, js ...*job.Job) func() error {
	return func() error {
		items := make([]job.FailItem, len(js))
		for i, j := range js {
			items[i] = job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: noRetry}
		}
		return accepted(b.s.JobFail(b.ctx, &store.JobFailParams{Items: items, Now: t0}))
	}
}

func (b *commitBundle) release(js ...*job.Job) func() error {
	return func() error {
		items := make([]job.ReleaseItem, len(js))
		for i, j := range js {
			items[i] = job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}
		}
		return accepted(b.s.JobRelease(b.ctx, &store.JobReleaseParams{Items: items, Now: t0}))
	}
}

// accepted is the error of a batch call or of its first refused item.
func accepted(out []job.Outcome, err error) error {
	if err != nil {
		return err
	}
	for _, o := range out {
		if o.Err != nil {
			return o.Err
		}
	}
	return nil
}

// A transaction that writes only process jobs commits with
// synchronous_commit off; one that writes any full job keeps it on, and
// the setting never outlives its transaction.
func TestProcessJobsCommitAsynchronously(t *testing.T) {
	t.Parallel()
	b := setupCommits(t)
	full, process := job.DurabilityFull, job.DurabilityProcess

	b.want("on", "insert of a full job", b.insert(full))
	b.want("off", "insert of process jobs", b.insert(process, process))
	b.want("on", "insert of a job of the default level", b.insert(""))
	b.want("on", "insert of a full and a process job", b.insert(process, full))
	b.want("off", "insert of process jobs", b.insert(process, process, process, process, process))
	b.want("on", "insert of full jobs", b.insert(full, full))

	js := b.claim()
	fulls, procs := js[full], js[process]
	if len(fulls) != 5 || len(procs) != 8 {
		t.Fatalf("claimed %d full and %d process jobs, want 5 and 8", len(fulls), len(procs))
	}
	b.want("off", "complete of process jobs", b.complete(procs[0], procs[1]))
	b.want("on", "complete of a full job", b.complete(fulls[0]))
	b.want("on", "complete of a full and a process job", b.complete(procs[2], fulls[1]))
	b.want("off", "retrying fail of a process job", b.fail(false, procs[3]))
	b.want("off", "final fail of a process job", b.fail(true, procs[4]))
	b.want("on", "fail of a full and a process job", b.fail(false, procs[5], fulls[2]))
	b.want("off", "release of a process job", b.release(procs[6]))
	b.want("on", "release of a full job", b.release(fulls[3]))
	b.want("on", "release of a full and a process job", b.release(fulls[4], procs[7]))

	// The released jobs again, one by one, each after the other level.
	js = b.claim()
	if len(js[full]) != 2 || len(js[process]) != 2 {
		t.Fatalf("claimed %d full and %d process jobs again, want 2 and 2", len(js[full]), len(js[process]))
	}
	for i := range 2 {
		b.want("off", "complete of a process job after a full one", b.complete(js[process][i]))
		b.want("on", "complete of a full job after a process one", b.complete(js[full][i]))
	}
}

// transact runs one transaction acking ack, failing fail and inserting
// jobs of the levels given.
func (b *commitBundle) transact(ack, fail []*job.Job, levels ...job.Durability) func() error {
	return func() error {
		p := &store.JobTransactParams{Now: t0}
		for _, j := range ack {
			p.Complete = append(p.Complete, job.CompleteItem{ID: j.ID, Token: j.LeaseToken})
		}
		for _, j := range fail {
			p.Fail = append(p.Fail, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x"})
		}
		for _, d := range levels {
			p.Insert = append(p.Insert, newParams(d))
		}
		_, err := b.s.JobTransact(b.ctx, p)
		return err
	}
}

// A transaction commits without waiting for the flush only when every
// job it acknowledges, fails and inserts is of process durability, even
// though each of its parts would relax the commit for its own jobs.
func TestTransactionsCommitAsynchronouslyOnlyWhenAllIsProcess(t *testing.T) {
	t.Parallel()
	b := setupCommits(t)
	full, process := job.DurabilityFull, job.DurabilityProcess
	b.want("on", "insert of full jobs", b.insert(full, full, full, full))
	b.want("off", "insert of process jobs", b.insert(process, process, process, process, process))
	js := b.claim()
	fulls, procs := js[full], js[process]
	if len(fulls) != 4 || len(procs) != 5 {
		t.Fatalf("claimed %d full and %d process jobs, want 4 and 5", len(fulls), len(procs))
	}
	one := func(j *job.Job) []*job.Job { return []*job.Job{j} }
	b.want("off", "transaction of process jobs", b.transact(one(procs[0]), one(procs[1]), process))
	b.want("on", "process acks and fails with a full insert", b.transact(one(procs[2]), one(procs[3]), full))
	b.want("on", "a process ack with a full fail", b.transact(one(procs[4]), one(fulls[0])))
	b.want("on", "a full ack with a process insert", b.transact(one(fulls[1]), nil, process))
	b.want("off", "inserts of process jobs alone", b.transact(nil, nil, process, process))
	b.want("on", "a full ack alone", b.transact(one(fulls[2]), nil))
	b.want("on", "a full fail alone", b.transact(nil, one(fulls[3])))
}

// The complete statement relaxes its commit by itself, outside any
// explicit transaction as JobComplete runs it: followed by a read in the
// same implicit transaction, it leaves synchronous_commit off when it
// completed process jobs only.
func TestCompleteStatementRelaxesItsOwnCommit(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Schema(t))
	ctx := context.Background()
	for _, tc := range []struct {
		levels []job.Durability
		want   string
	}{
		{[]job.Durability{job.DurabilityProcess, job.DurabilityProcess}, "off"},
		{[]job.Durability{job.DurabilityFull}, "on"},
		{[]job.Durability{job.DurabilityProcess, job.DurabilityFull}, "on"},
	} {
		ps := make([]store.JobInsertParams, len(tc.levels))
		for i, d := range tc.levels {
			ps[i] = newParams(d)
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
			t.Fatal(err)
		}
		js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: len(ps), Now: t0}))
		if err != nil || len(js) != len(ps) {
			t.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		var ids []string
		var tokens []int64
		var results [][]byte
		for _, j := range js {
			ids, tokens, results = append(ids, j.ID), append(tokens, j.LeaseToken), append(results, nil)
		}
		batch := &pgx.Batch{}
		batch.Queue(sqlComplete, ids, tokens, results, t0, ackCancelled, ackCompleted, s.channel, s.node, notifyChunk)
		batch.Queue(`SELECT current_setting('synchronous_commit')`)
		br := s.pool.SendBatch(ctx, batch)
		tag, err := br.Exec()
		if err != nil || tag.RowsAffected() != int64(len(ids)) {
			t.Fatalf("complete %v: %d rows, %v", tc.levels, tag.RowsAffected(), err)
		}
		var got string
		if err := br.QueryRow().Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := br.Close(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Fatalf("complete of %v jobs left synchronous_commit %s, want %s", tc.levels, got, tc.want)
		}
	}
}

// Memory jobs are refused with an input error that names the job's field,
// by an insert and by an import, and nothing of the call is stored.
func TestMemoryJobsAreRefused(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Schema(t))
	ctx := context.Background()
	ps := []store.JobInsertParams{newParams(job.DurabilityProcess), newParams(job.DurabilityMemory)}
	_, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0})
	var in *job.InputError
	if !errors.As(err, &in) || in.Field != "jobs[1].durability" {
		t.Fatalf("insert of a memory job: %v, want an input error on jobs[1].durability", err)
	}
	imported := []*job.Job{newJob(&ps[0], t0, t0), newJob(&ps[1], t0, t0)}
	if _, err := s.ImportJobs(ctx, imported); !errors.As(err, &in) || in.Field != "durability" {
		t.Fatalf("import of a memory job: %v, want an input error on durability", err)
	}
	if qs, err := s.QueueList(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("queues after the refusals: %v, %v", qs, err)
	}
	for _, p := range ps {
		if _, err := s.JobGet(ctx, p.ID); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("job %s after the refusals: %v", p.ID, err)
		}
	}
}
