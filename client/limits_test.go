package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

func TestQueueLimitsCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		all := client.Limits{
			Rate:      client.Rate{Limit: 100, Period: time.Minute},
			MaxActive: 7,
			GroupRate: client.Rate{Limit: 3, Period: 1500 * time.Millisecond}, GroupMaxActive: 2,
		}
		q, err := b.c.SetQueueLimits(b.ctx, "lim", all)
		if err != nil {
			t.Fatal(err)
		}
		if q.Name != "lim" || q.Limits != all {
			t.Fatalf("set limits: %+v", q)
		}
		if q, err := b.c.Queue(b.ctx, "lim"); err != nil || q.Limits != all {
			t.Fatalf("queue after set: %+v, %v", q, err)
		}
		// A set replaces the limits as a whole.
		only := client.Limits{MaxActive: 1}
		if q, err := b.c.SetQueueLimits(b.ctx, "lim", only); err != nil || q.Limits != only {
			t.Fatalf("replace limits: %+v, %v", q, err)
		}
		qs, err := b.c.Queues(b.ctx)
		if err != nil || len(qs) != 1 || qs[0].Limits != only {
			t.Fatalf("queues: %+v, %v", qs, err)
		}

		for _, c := range []struct {
			limits client.Limits
			field  string
		}{
			{client.Limits{MaxActive: -1}, "max_active"},
			{client.Limits{GroupMaxActive: 1_000_001}, "group_max_active"},
			{client.Limits{Rate: client.Rate{Limit: 5}}, "rate.period_ms"},
			{client.Limits{Rate: client.Rate{Period: time.Second}}, "rate.limit"},
			{client.Limits{GroupRate: client.Rate{Limit: 100_001, Period: time.Second}}, "group_rate.limit"},
			{client.Limits{GroupRate: client.Rate{Limit: 1, Period: 25 * time.Hour}}, "group_rate.period_ms"},
		} {
			_, err := b.c.SetQueueLimits(b.ctx, "lim", c.limits)
			var apiErr *client.Error
			if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Field != c.field {
				t.Errorf("limits %+v: %v, want invalid_argument on %s", c.limits, err, c.field)
			}
		}
		if q, err := b.c.Queue(b.ctx, "lim"); err != nil || q.Limits != only {
			t.Fatalf("refused limits changed the queue: %+v, %v", q, err)
		}
		if _, err := b.c.SetQueueLimits(b.ctx, "bad name!", only); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("limits of a bad queue name: %v", err)
		}

		if q, err := b.c.ClearQueueLimits(b.ctx, "lim"); err != nil || !q.Limits.IsZero() {
			t.Fatalf("clear limits: %+v, %v", q, err)
		}
		if q, err := b.c.SetQueueLimits(b.ctx, "lim", all); err != nil || q.Limits != all {
			t.Fatalf("set limits again: %+v, %v", q, err)
		}
		if q, err := b.c.SetQueueLimits(b.ctx, "lim", client.Limits{}); err != nil || !q.Limits.IsZero() {
			t.Fatalf("zero limits: %+v, %v", q, err)
		}
		// Limits create a queue, as a pause does.
		if q, err := b.c.ClearQueueLimits(b.ctx, "fresh"); err != nil || q.Name != "fresh" || !q.Limits.IsZero() {
			t.Fatalf("clear limits of an unknown queue: %+v, %v", q, err)
		}
	})
}

func TestGroups(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		id := b.enqueue(client.EnqueueParams{Queue: "g", Kind: "k", Group: "tenant-42"})
		if j := b.get(id); j.Group != "tenant-42" {
			t.Fatalf("group %q", j.Group)
		}
		if j := b.get(b.enqueue(client.EnqueueParams{Queue: "other", Kind: "k"})); j.Group != "" {
			t.Fatalf("a job without a group has group %q", j.Group)
		}
		var apiErr *client.Error
		for _, g := range []string{"a\x00b", strings.Repeat("g", 257)} {
			_, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "g", Kind: "k", Group: g})
			if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "group" {
				t.Errorf("group %.10q: %v, want invalid_argument on group", g, err)
			}
		}
		_, err := b.c.EnqueueBatch(b.ctx, []client.EnqueueParams{{Queue: "g", Kind: "k"}, {Queue: "g", Kind: "k", Group: "a\x00"}})
		if !errors.As(err, &apiErr) || apiErr.Field != "jobs[1].group" {
			t.Fatalf("batch with a bad group: %v", err)
		}

		// Round-robin: a big group enqueued first does not hold back a
		// small one, nor the jobs without a group.
		var ps []client.EnqueueParams
		for range 5 {
			ps = append(ps, client.EnqueueParams{Queue: "rr", Kind: "k", Group: "big"})
		}
		ps = append(ps, client.EnqueueParams{Queue: "rr", Kind: "k", Group: "small"}, client.EnqueueParams{Queue: "rr", Kind: "k"})
		if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
			t.Fatal(err)
		}
		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"rr"}, Max: 3})
		if err != nil {
			t.Fatal(err)
		}
		var groups []string
		for _, j := range jobs {
			groups = append(groups, j.Group)
		}
		slices.Sort(groups)
		if !slices.Equal(groups, []string{"", "big", "small"}) {
			t.Fatalf("first turn handed out groups %q, want one job of each", groups)
		}
	})
}

// A Worker with ten slots on a queue capped at two runs at most two
// handlers at once, and still runs every job.
func TestWorkerOnACappedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, limit = 12, 2
	if _, err := b.c.SetQueueLimits(b.ctx, "capped", client.Limits{MaxActive: limit}); err != nil {
		t.Fatal(err)
	}
	ps := make([]client.EnqueueParams, n)
	for i := range ps {
		ps[i] = client.EnqueueParams{Queue: "capped", Kind: "k", Group: []string{"a", "b", "c"}[i%3]}
	}
	if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"capped"}, Concurrency: 10})
	var running, peak atomic.Int32
	finished := make(chan struct{}, n)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		now := running.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		running.Add(-1)
		finished <- struct{}{}
		return nil, nil
	})
	done := runWorker(t, w)
	for range n {
		recv(t, finished, 10*time.Second, "the handlers")
	}
	stopWorker(t, w, done)
	if p := peak.Load(); p > limit || p < 1 {
		t.Fatalf("%d handlers ran at once on a queue capped at %d", p, limit)
	}
	if q, err := b.c.Queue(b.ctx, "capped"); err != nil || q.Counts.Completed != n {
		t.Fatalf("queue after the run: %+v, %v", q, err)
	}
}

// A rate lets its limit of jobs start, and a long poll gets the next one
// once the window has moved on.
func TestRateHoldsOverFetches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.enqueue(client.EnqueueParams{Queue: "slow", Kind: "k"})
	}
	const period = 400 * time.Millisecond
	if _, err := b.c.SetQueueLimits(b.ctx, "slow", client.Limits{Rate: client.Rate{Limit: 2, Period: period}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"slow"}, Max: 10})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("first fetch: %d jobs, %v; want the rate's 2", len(jobs), err)
	}
	jobs, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"slow"}, Max: 10, Wait: 10 * time.Second})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("long poll: %d jobs, %v", len(jobs), err)
	}
	if took := time.Since(start); took < period-50*time.Millisecond || took > 5*time.Second {
		t.Fatalf("the third job started %v after the first two, rate 2 per %v", took, period)
	}
}

func TestLimitsJSON(t *testing.T) {
	t.Parallel()
	q := client.Queue{Name: "q", Limits: client.Limits{Rate: client.Rate{Limit: 5, Period: 1500 * time.Microsecond}, GroupMaxActive: 1}}
	data, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	// The period is rounded up to whole milliseconds, and limits not set
	// are left out.
	if !strings.Contains(string(data), `"limits":{"rate":{"limit":5,"period_ms":2},"group_max_active":1}`) {
		t.Fatalf("queue JSON: %s", data)
	}
	var back client.Queue
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	want := client.Limits{Rate: client.Rate{Limit: 5, Period: 2 * time.Millisecond}, GroupMaxActive: 1}
	if back.Limits != want {
		t.Fatalf("round trip: %+v, want %+v", back.Limits, want)
	}
	if data, _ := json.Marshal(client.Queue{Name: "plain"}); strings.Contains(string(data), "limits") {
		t.Fatalf("a queue without limits: %s", data)
	}
	j, _ := json.Marshal(client.Job{ID: "j", Group: "tenant-42"})
	var jb client.Job
	if err := json.Unmarshal(j, &jb); err != nil || !strings.Contains(string(j), `"group":"tenant-42"`) || jb.Group != "tenant-42" {
		t.Fatalf("job JSON %s: %+v, %v", j, jb, err)
	}
}

// A Worker on an ordered queue completes each group's jobs in enqueue
// order although every other job fails its first attempt, and runs the
// groups side by side.
func TestWorkerOnAnOrderedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const groups, each = 3, 4
	q, err := b.c.SetQueueLimits(b.ctx, "ordered", client.Limits{Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Limits.Ordered || q.Limits.GroupMaxActive != 1 {
		t.Fatalf("ordered queue's limits: %+v", q.Limits)
	}
	var ps []client.EnqueueParams
	for i := range each {
		for p := range groups {
			ps = append(ps, client.EnqueueParams{Queue: "ordered", Kind: "k", Group: string(rune('a' + p)), Payload: map[string]int{"n": i}})
		}
	}
	if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"ordered"}, Concurrency: 10})
	var mu sync.Mutex
	done := map[string][]int{}
	finished := make(chan struct{}, len(ps))
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, err
		}
		if p.N%2 == 0 && j.Attempt == 1 {
			return nil, client.RetryAfter(errors.New("not yet"), 20*time.Millisecond)
		}
		mu.Lock()
		done[j.Group] = append(done[j.Group], p.N)
		mu.Unlock()
		finished <- struct{}{}
		return nil, nil
	})
	running := runWorker(t, w)
	for range ps {
		recv(t, finished, 20*time.Second, "the handlers")
	}
	stopWorker(t, w, running)
	for p := range groups {
		if g := string(rune('a' + p)); !slices.Equal(done[g], []int{0, 1, 2, 3}) {
			t.Fatalf("group %s completed %v, want 0 1 2 3", g, done[g])
		}
	}
}

// A fetch with a group gets the jobs of that group alone, in priority
// order, and never one without a group; a bad group is refused naming the
// field.
func TestFetchOneGroup(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		first := b.enqueue(client.EnqueueParams{Queue: "g", Kind: "k", Group: "a"})
		b.enqueue(client.EnqueueParams{Queue: "g", Kind: "k", Group: "b"})
		b.enqueue(client.EnqueueParams{Queue: "g", Kind: "k"})
		urgent := b.enqueue(client.EnqueueParams{Queue: "g", Kind: "k", Group: "a", Priority: 9})
		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"g"}, Max: 10, Group: "a"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if !slices.Equal(ids, []string{urgent, first}) {
			t.Fatalf("fetch of group a: %v, want %v", ids, []string{urgent, first})
		}
		if jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"g"}, Max: 10, Group: "a"}); err != nil || len(jobs) != 0 {
			t.Fatalf("fetch of group a once it ran dry: %d jobs, %v", len(jobs), err)
		}
		var apiErr *client.Error
		for _, g := range []string{"a\x00b", strings.Repeat("g", 257)} {
			_, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"g"}, Group: g})
			if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "group" {
				t.Errorf("fetch of group %.10q: %v, want invalid_argument on group", g, err)
			}
		}
	})
}

// A Worker of one group runs the jobs of that group and leaves the others
// where they are.
func TestWorkerOfOneGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ps []client.EnqueueParams
	for i := range 6 {
		ps = append(ps, client.EnqueueParams{Queue: "tenants", Kind: "k", Group: []string{"mine", "theirs", ""}[i%3]})
	}
	if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"tenants"}, Group: "mine", Concurrency: 4})
	ran := make(chan string, len(ps))
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		ran <- j.Group
		return nil, nil
	})
	done := runWorker(t, w)
	for range 2 {
		if g := recv(t, ran, 10*time.Second, "the handlers"); g != "mine" {
			t.Fatalf("the worker of group mine ran a job of group %q", g)
		}
	}
	stopWorker(t, w, done)
	select {
	case g := <-ran:
		t.Fatalf("the worker of group mine ran a job of group %q", g)
	default:
	}
	if q, err := b.c.Queue(b.ctx, "tenants"); err != nil || q.Counts.Completed != 2 || q.Counts.Available != 4 {
		t.Fatalf("queue after the run: %+v, %v", q, err)
	}
}
