package sqlitestore

import (
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// A job that a claim kills past its maximum wait leaves its dead-letter
// copy as an insert would leave a job: with the dead job's group, history
// and origin, the wait deadline of a dead-letter queue with a maximum
// wait, and a copy in each consumer group of the dead-letter queue; the
// counts of every queue follow.
func TestADeadLetterCopyIsWrittenWhole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	if err := b.s.QueueSetSettings(ctx, "q", job.QueueSettings{DeadLetterQueue: "dlq", MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.QueueSetSettings(ctx, "dlq", job.QueueSettings{MaxWait: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: "dlq", Name: "audit", Now: t0}); err != nil {
		t.Fatal(err)
	}
	dead := b.insert(params("q", 1, func(_ int, p *store.JobInsertParams) { p.Group, p.Tags = "tenant", []string{"t"} })...)[0].Job

	later := t0.Add(2 * time.Minute)
	res, err := b.s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1, Now: later})
	if err != nil || len(res.Jobs) != 0 || !slices.Contains(res.Available, "dlq") {
		t.Fatalf("claim past the wait: %+v, %v; want no job and the dead-letter queue available", res, err)
	}
	if got := b.get(dead.ID); got.State != job.StateDead {
		t.Fatalf("the job past its wait is %s, want dead", got.State)
	}
	lane := job.LaneName("dlq", "audit")
	copies := b.list("dlq")
	laneCopies := b.list(lane)
	if len(copies) != 1 || len(laneCopies) != 1 {
		t.Fatalf("%d copies and %d copies in the consumer group, want one each", len(copies), len(laneCopies))
	}
	c := copies[0]
	if c.State != job.StateAvailable || c.DeadLetterOf != (job.JobRef{Queue: "q", ID: dead.ID}) || c.Group != "tenant" ||
		!slices.Equal(c.Tags, []string{"t"}) || len(c.Errors) != 1 || c.Errors[0].Message != job.MaxWaitMessage {
		t.Fatalf("copy %+v, want an available copy of %s with its group, tags and the wait's error", c, dead.ID)
	}
	if lc := laneCopies[0]; lc.ID != job.CopyID(c.ID, "audit") || lc.Group != "tenant" || !lc.DeadLetterOf.IsZero() {
		t.Fatalf("consumer group's copy %+v, want the copy of %s", lc, c.ID)
	}
	for _, q := range []string{"q", "dlq", lane} {
		b.checkCounts(q)
	}

	// The copy waits no longer than its queue's maximum wait, measured
	// from its death: the sweep kills it past that, not before.
	if r, err := b.s.JobExpireWaiting(ctx, later.Add(time.Hour-time.Second), 10); err != nil || r.Count != 0 {
		t.Fatalf("sweep before the copy's wait ran out: %+v, %v", r, err)
	}
	if r, err := b.s.JobExpireWaiting(ctx, later.Add(time.Hour), 10); err != nil || r.Count != 1 {
		t.Fatalf("sweep after the copy's wait ran out: %+v, %v; want it killed", r, err)
	}
	if got := b.get(c.ID); got.State != job.StateDead {
		t.Fatalf("the copy past its wait is %s, want dead", got.State)
	}
}

// list returns every job of queue.
func (b *bundle) list(queue string) []*job.Job {
	b.t.Helper()
	page, err := b.s.JobList(b.ctx, &job.ListParams{Queue: queue, Limit: 100})
	if err != nil {
		b.t.Fatalf("list %s: %v", queue, err)
	}
	return page.Jobs
}
