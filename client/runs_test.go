package client_test

import (
	"slices"
	"testing"

	"github.com/spoolq/spool/client"
)

// orderedJobs makes queue ordered and enqueues each of groups' jobs
// 0 to n-1, the groups' jobs interleaved, with their number as payload.
// It returns each group's job ids in enqueue order.
func (b *bundle) orderedJobs(queue string, groups []string, n int) map[string][]string {
	b.t.Helper()
	if _, err := b.c.SetQueueLimits(b.ctx, queue, client.Limits{Ordered: true}); err != nil {
		b.t.Fatal(err)
	}
	var ps []client.EnqueueParams
	for i := range n {
		for _, g := range groups {
			ps = append(ps, client.EnqueueParams{Queue: queue, Kind: "k", Group: g, Payload: map[string]int{"n": i}})
		}
	}
	res, err := b.c.EnqueueBatch(b.ctx, ps)
	if err != nil {
		b.t.Fatal(err)
	}
	ids := map[string][]string{}
	for i, r := range res {
		ids[ps[i].Group] = append(ids[ps[i].Group], r.ID)
	}
	return ids
}

// A fetch with Runs takes a free ordered group's jobs as one run, in
// enqueue order; without it the group gives one job.
func TestFetchRuns(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		withRuns := b.orderedJobs("with-runs", []string{"g"}, 5)["g"]
		without := b.orderedJobs("without-runs", []string{"g"}, 5)["g"]

		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"with-runs"}, Max: 10, Runs: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		if !slices.Equal(got, withRuns) {
			t.Fatalf("fetch with runs: %v, want the group's 5 jobs in enqueue order %v", got, withRuns)
		}

		jobs, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"without-runs"}, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].ID != without[0] {
			t.Fatalf("fetch without runs: %d jobs, want the group's first alone (%s)", len(jobs), without[0])
		}
	})
}
