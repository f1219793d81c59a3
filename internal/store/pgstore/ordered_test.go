package pgstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/storetest"
)

// orderedJobs returns the parameters of n jobs for each of the groups
// p0…p(groups-1) of queue, the groups' jobs interleaved, and the
// ids of each group in enqueue order.
func orderedJobs(queue string, groups, n int) ([]store.JobInsertParams, map[string][]string) {
	var ps []store.JobInsertParams
	ids := make(map[string][]string, groups)
	for range n {
		for p := range groups {
			jp := newParams(job.DurabilityFull)
			jp.Queue, jp.Group = queue, fmt.Sprintf("p%d", p)
			ps = append(ps, jp)
			ids[jp.Group] = append(ids[jp.Group], jp.ID)
		}
	}
	return ps, ids
}

// orderedNodes opens two nodes on one fresh schema with an ordered queue
// q of groups × perGroup jobs, each with attempts enough for any number
// of failures, and returns them with each group's ids in enqueue order.
func orderedNodes(t *testing.T, groups, perGroup int) ([]store.Store, map[string][]string) {
	t.Helper()
	url := pgtest.Schema(t)
	nodes := []*Store{open(t, url), open(t, url)}
	ps, parts := orderedJobs("q", groups, perGroup)
	for i := range ps {
		ps[i].MaxAttempts = 1000
	}
	mustInsert(t, nodes[0], ps)
	if err := nodes[1].QueueSetLimits(context.Background(), "q", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	return []store.Store{nodes[0], nodes[1]}, parts
}

// Two nodes claiming one ordered queue at once, with workers that fail or
// release some of their jobs, never hand out two jobs of a group at
// once, and every group's jobs complete in enqueue order.
func TestOrderedGroupsAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes, parts := orderedNodes(t, 300, 4)
	storetest.OrderedWorkers(t, nodes, "q", parts, 6, t0)
}

// Two nodes claiming runs of one ordered queue at once, with workers that
// fail or release some jobs of their runs, never hand out a group's run
// while a job of it is out, and every group's jobs complete in enqueue
// order.
func TestOrderedRunsAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes, parts := orderedNodes(t, 100, 8)
	storetest.OrderedRunWorkers(t, nodes, "q", parts, 6, t0)
}

// A waiting job that held its group in an ordered queue and is cancelled
// or deleted wakes the fetches parked on the queue on other nodes, since
// the group's next job may go; in a queue that is not ordered it sends
// nothing.
func TestOrderedFreedGroupWakesOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	next := listenOn(t, url, s)
	ps, _ := orderedJobs("o", 1, 3)
	mustInsert(t, s, append(ps, groupJobs("plain", "", 1)...))
	if qs := next(); !slices.Equal(qs, []string{"o", "plain"}) {
		t.Fatalf("after an insert: woken for %v", qs)
	}
	if err := s.QueueSetLimits(ctx, "o", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after setting limits: woken for %v", qs)
	}
	// retrying claims the next job of queue and fails it into a retry,
	// which announces the ordered queue (its job stops being active).
	retrying := func(queue string) *job.Job {
		t.Helper()
		js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 5, Now: t0}))
		if err != nil || len(js) != 1 {
			t.Fatalf("claim %s: %v, %v; want one job", queue, idsOf(js), err)
		}
		if err := accepted(s.JobFail(ctx, &store.JobFailParams{Now: t0,
			Items: []job.FailItem{{ID: js[0].ID, Token: js[0].LeaseToken, Message: "x", RetryAfter: time.Hour}}})); err != nil {
			t.Fatal(err)
		}
		return js[0]
	}
	plain := retrying("plain")
	held := retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"o"}, Max: 5, Now: t0})); err != nil || len(js) != 0 {
		t.Fatalf("claim while the group's job retries: %v, %v", idsOf(js), err)
	}
	// The plain queue's cancel sends nothing: the next notification is
	// the ordered queue's.
	if _, err := s.JobCancel(ctx, plain.ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, held.ID, t0); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a cancel: woken for %v, want the ordered queue", qs)
	}
	held = retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if err := s.JobDelete(ctx, held.ID); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a delete: woken for %v, want the ordered queue", qs)
	}
	retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if n, err := s.JobDeleteMany(ctx, &store.JobBulkParams{Queue: "o", State: job.StateRetrying}); err != nil || n != 1 {
		t.Fatalf("delete the retrying jobs: %d, %v", n, err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a bulk delete: woken for %v, want the ordered queue", qs)
	}
}
