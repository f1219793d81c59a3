package storetest

import (
	"errors"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func createTests() []group {
	return []group{{"CreatedQueues", []test{
		{"AnInsertCreatesItsNewQueuesConfigured", testCreateNew},
		{"AQueueTheStoreKnowsKeepsItsConfiguration", testCreateKeepsKnown},
		{"AnInsertOfNoJobsCreatesQueues", testCreateWithoutJobs},
		{"ARefusedInsertCreatesNothing", testCreateRefusedInsert},
		{"ATransactionCreatesItsQueuesOrNone", testCreateTransact},
	}}}
}

// queenLike is the configuration of a queue created ordered with job
// defaults, as Queen's API creates them.
func queenLike(name string) store.QueueConfig {
	return store.QueueConfig{Name: name, Limits: job.Limits{Ordered: true}.Normalized(),
		Settings: job.QueueSettings{DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 4, MaxWait: time.Hour}}
}

// wantConfig fails unless queue name exists with limits l and settings s.
func (b *bundle) wantConfig(what, name string, l job.Limits, s job.QueueSettings) {
	b.t.Helper()
	q, err := b.s.QueueGet(b.ctx, name)
	if err != nil {
		b.t.Fatalf("%s: queue %s: %v", what, name, err)
	}
	if q.Limits != l || q.Settings != s {
		b.t.Fatalf("%s: queue %s has limits %+v and settings %+v, want %+v and %+v", what, name, q.Limits, q.Settings, l, s)
	}
	d, err := b.s.QueueDefaults(b.ctx, name)
	if err != nil || d.Settings != s {
		b.t.Fatalf("%s: defaults of queue %s: %+v, %v; want settings %+v", what, name, d, err, s)
	}
}

// wantNoQueue fails unless the store does not know queue name.
func (b *bundle) wantNoQueue(what, name string) {
	b.t.Helper()
	if _, err := b.s.QueueGet(b.ctx, name); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("%s: queue %s: %v, want not found", what, name, err)
	}
}

// The queues an insert creates get their limits and settings in the
// insert, those with jobs and those without, and their jobs follow the
// limits from the first claim on.
func testCreateNew(b *bundle) {
	fresh, empty := queenLike("fresh"), store.QueueConfig{Name: "empty", Limits: job.Limits{MaxActive: 2}}
	jobs := newJobs("fresh", 2, func(p *store.JobInsertParams) { p.Group = "p" })
	jobs = append(jobs, newJob("plain"))
	res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: jobs,
		Create: []store.QueueConfig{fresh, {Name: "plain"}, empty}, Now: t0})
	if err != nil || len(res) != 3 {
		b.t.Fatalf("insert creating queues: %v, %v", res, err)
	}
	b.wantConfig("a queue created ordered", "fresh", fresh.Limits, fresh.Settings)
	b.wantConfig("a queue created plain", "plain", job.Limits{}, job.QueueSettings{})
	b.wantConfig("a queue created with no job", "empty", empty.Limits, job.QueueSettings{})
	if got := b.claimAt(at(time.Second), 10, "fresh"); len(got) != 1 || got[0].ID != jobs[0].ID {
		b.t.Fatalf("claim of the ordered queue created with its jobs: %v, want its first job alone", idsOf(got))
	}
}

// A queue the store knows, with or without jobs and configuration, is
// left as it is by an insert that would create it.
func testCreateKeepsKnown(b *bundle) {
	b.add(newJob("native"))
	tuned := job.QueueSettings{DefaultMaxAttempts: 9}
	if err := b.s.QueueSetSettings(b.ctx, "tuned", tuned); err != nil {
		b.t.Fatalf("set settings: %v", err)
	}
	if err := b.s.QueueSetPaused(b.ctx, "paused", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	jobs := append(newJobs("native", 2, func(p *store.JobInsertParams) { p.Group = "p" }), newJob("tuned"), newJob("paused"))
	if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: jobs,
		Create: []store.QueueConfig{queenLike("native"), queenLike("tuned"), queenLike("paused")}, Now: t0}); err != nil {
		b.t.Fatalf("insert: %v", err)
	}
	b.wantConfig("a queue with jobs", "native", job.Limits{}, job.QueueSettings{})
	b.wantConfig("a queue with settings", "tuned", job.Limits{}, tuned)
	b.wantConfig("a paused queue", "paused", job.Limits{}, job.QueueSettings{})
	if got := b.claimAt(at(time.Second), 10, "native"); len(got) != 3 {
		b.t.Fatalf("claim of the queue that kept its configuration: %v, want its 3 jobs", idsOf(got))
	}
}

// An insert of no jobs creates its queues, once: again, it changes
// nothing.
func testCreateWithoutJobs(b *bundle) {
	c := queenLike("q")
	for range 2 {
		res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Create: []store.QueueConfig{c}, Now: t0})
		if err != nil || len(res) != 0 {
			b.t.Fatalf("insert of no jobs creating a queue: %v, %v", res, err)
		}
		b.wantConfig("a queue created without jobs", "q", c.Limits, c.Settings)
	}
	qs, err := b.s.QueueList(b.ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "q" {
		b.t.Fatalf("queues: %v, %v; want q alone", queueNames(qs), err)
	}
}

// An insert refused by the store creates none of its queues.
func testCreateRefusedInsert(b *bundle) {
	first := b.jobIn(job.StateActive, "q")
	taken := newJob("new-b", func(p *store.JobInsertParams) { p.ID = first.ID })
	_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{newJob("new-a"), taken},
		Create: []store.QueueConfig{queenLike("new-a"), queenLike("new-b"), queenLike("new-c")}, Now: at(time.Minute)})
	if !errors.Is(err, job.ErrIDTaken) {
		b.t.Fatalf("insert of an id of another queue: %v, want id taken", err)
	}
	for _, name := range []string{"new-a", "new-b", "new-c"} {
		b.wantNoQueue("a refused insert", name)
	}
	b.unchanged("a refused insert", first)
}

// A transaction creates its queues when it commits, and none when a
// lease it names is gone.
func testCreateTransact(b *bundle) {
	held := b.jobIn(job.StateActive, "q")
	b.refused("a stale token with queues to create", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: held.ID, Token: held.LeaseToken + 1}},
		Insert:   []store.JobInsertParams{newJob("tx-a")},
		Create:   []store.QueueConfig{queenLike("tx-a"), queenLike("tx-b")},
		Now:      at(time.Minute),
	}, "ack[0].token", job.ErrLeaseLost, []*job.Job{held}, "q")
	b.wantNoQueue("a refused transaction", "tx-a")
	b.wantNoQueue("a refused transaction", "tx-b")
	b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: held.ID, Token: held.LeaseToken}},
		Insert:   []store.JobInsertParams{newJob("tx-a")},
		Create:   []store.QueueConfig{queenLike("tx-a"), queenLike("tx-b")},
		Now:      at(time.Minute),
	})
	b.wantConfig("a transaction's queue with a job", "tx-a", queenLike("tx-a").Limits, queenLike("tx-a").Settings)
	b.wantConfig("a transaction's queue without a job", "tx-b", queenLike("tx-b").Limits, queenLike("tx-b").Settings)
}
