package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// Shape of the ordered load.
const (
	// orderedGroups is how many groups (partitions) the ordered queue
	// spreads its jobs over, and orderedConsumers how many workers take
	// their runs.
	orderedGroups    = 4
	orderedConsumers = 2
	// orderedFetch is the most jobs a consumer fetches at once, in runs.
	orderedFetch = 40
	// orderedPace is the producer's pause between enqueues.
	orderedPace = 15 * time.Millisecond
)

// orderedLoad runs an ordered queue beside the mixed load: one producer
// enqueues each group's jobs in order, a batch at a time, each batch only
// once the one before was answered; consumers fetch runs, work each run in
// order, acking most jobs and failing or releasing one now and then, which
// drops the rest of the run (the server takes it back). Its check, after
// the drain: every job it enqueued completed, and each group's jobs
// finished in enqueue order.
type orderedLoad struct {
	c     *client.Client
	queue string
	ctx   context.Context
	stop  context.CancelFunc
	seed  uint64
	// producing ends with the producer, working with the consumers.
	producing, working sync.WaitGroup
	stopWork           context.CancelFunc
	workCtx            context.Context

	mu sync.Mutex
	// enqueued counts each group's jobs enqueued for sure, the n of the
	// next; gaveUp counts the calls given up after their retries.
	enqueued [orderedGroups]int
	gaveUp   int
}

// orderedPayload is an ordered job's payload: its group and its place in
// the group's enqueue order.
type orderedPayload struct {
	G string `json:"g"`
	N int    `json:"n"`
}

// startOrdered makes queue ordered and starts the ordered load on c.
func startOrdered(parent context.Context, c *client.Client, queue string, seed uint64) (*orderedLoad, error) {
	ctx, cancel := context.WithTimeout(parent, callTimeout)
	defer cancel()
	if _, err := c.SetQueueLimits(ctx, queue, client.Limits{Ordered: true}); err != nil {
		return nil, fmt.Errorf("make queue %s ordered: %w", queue, err)
	}
	o := &orderedLoad{c: c, queue: queue, seed: seed}
	o.ctx, o.stop = context.WithCancel(parent)
	o.workCtx, o.stopWork = context.WithCancel(parent)
	o.producing.Add(1)
	go o.produce()
	for i := range orderedConsumers {
		o.working.Add(1)
		go o.consume(i)
	}
	return o, nil
}

// produce enqueues batches of each group's next jobs until the load stops.
func (o *orderedLoad) produce() {
	defer o.producing.Done()
	rng := rand.New(rand.NewPCG(o.seed, 7))
	for o.ctx.Err() == nil {
		var ps []client.EnqueueParams
		next := o.enqueued
		for g := range orderedGroups {
			for range rng.IntN(4) {
				ps = append(ps, o.job(g, next[g]))
				next[g]++
			}
		}
		if len(ps) > 0 {
			if !o.call(o.ctx, func(ctx context.Context) error { _, err := o.c.EnqueueBatch(ctx, ps); return err }) {
				return
			}
			o.mu.Lock()
			o.enqueued = next
			o.mu.Unlock()
		}
		loadgen.Sleep(o.ctx, orderedPace)
	}
}

// job is the enqueue of the n-th job of group g.
func (o *orderedLoad) job(g, n int) client.EnqueueParams {
	group := fmt.Sprintf("g%d", g)
	return client.EnqueueParams{ID: fmt.Sprintf("ord-%s-%06d", group, n), Queue: o.queue, Kind: "ordered",
		Group: group, Payload: orderedPayload{G: group, N: n}, MaxAttempts: 1000, Lease: 5 * time.Second}
}

// call sends fn until it is answered for sure (see outcome.retryable)
// and reports whether it succeeded; the calls it gives up are counted.
func (o *orderedLoad) call(ctx context.Context, fn func(ctx context.Context) error) bool {
	deadline := time.Now().Add(settleLimit)
	pause := minRetry
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn(cctx)
		cancel()
		out := classify(err)
		switch {
		case !out.retryable():
			return out.typ == TypeOK
		case ctx.Err() != nil:
			return false // the load stopped
		case time.Now().After(deadline):
			o.mu.Lock()
			o.gaveUp++
			o.mu.Unlock()
			return false
		}
		loadgen.Sleep(ctx, pause/2+rand.N(pause/2+1))
		pause = min(pause*2, maxRetry)
	}
}

// consume fetches runs and works them until the work stops.
func (o *orderedLoad) consume(idx int) {
	defer o.working.Done()
	rng := rand.New(rand.NewPCG(o.seed, uint64(100+idx)))
	for o.workCtx.Err() == nil {
		ctx, cancel := context.WithTimeout(o.workCtx, fetchWait+callTimeout)
		jobs, err := o.c.Fetch(ctx, client.FetchParams{Queues: []string{o.queue}, Max: orderedFetch, Wait: fetchWait,
			Runs: true, Worker: fmt.Sprintf("ordered-%d", idx)})
		cancel()
		if err != nil {
			loadgen.Sleep(o.workCtx, 50*time.Millisecond)
			continue
		}
		var groups []string
		runs := map[string][]*client.Job{}
		for _, j := range jobs {
			if runs[j.Group] == nil {
				groups = append(groups, j.Group)
			}
			runs[j.Group] = append(runs[j.Group], j)
		}
		for _, g := range groups {
			o.work(rng, runs[g])
		}
	}
}

// work works one run in order: it acks each job, or fails or releases
// one now and then, and stops at the first job that is not acked for
// sure, whose run the server took back.
func (o *orderedLoad) work(rng *rand.Rand, run []*client.Job) {
	for _, j := range run {
		var ok bool
		switch roll := rng.IntN(100); {
		case roll < 6:
			o.call(o.workCtx, func(ctx context.Context) error {
				_, err := o.c.Fail(ctx, j.ID, j.Token(), client.FailParams{Error: "ordered failure", RetryAfter: 20 * time.Millisecond})
				return err
			})
		case roll < 9:
			o.call(o.workCtx, func(ctx context.Context) error { _, err := o.c.Release(ctx, j.ID, j.Token()); return err })
		default:
			ok = o.call(o.workCtx, func(ctx context.Context) error { _, err := o.c.Ack(ctx, j.ID, j.Token(), nil); return err })
		}
		if !ok {
			return
		}
	}
}

// orderedResult is what the ordered load checked.
type orderedResult struct {
	// Jobs is how many jobs it enqueued for sure, in Groups groups.
	Jobs   int `json:"jobs"`
	Groups int `json:"groups"`
	// OutOfOrder counts the jobs that finished before one enqueued ahead
	// of them in their group; Unfinished those that did not complete.
	OutOfOrder int `json:"out_of_order"`
	Unfinished int `json:"unfinished"`
	// GaveUp counts the calls given up after their retries.
	GaveUp int `json:"gave_up"`
}

// finish stops the producer, waits up to limit for the queue to drain
// with the consumers running, stops them and checks the queue: every job
// enqueued completed, each group's in enqueue order. Failures go to v.
func (o *orderedLoad) finish(ctx context.Context, v *Verdict, limit time.Duration) orderedResult {
	o.stop()
	o.producing.Wait()
	if _, err := waitDrained(ctx, o.c, o.queue, limit); err != nil {
		v.failf("ordered: drain: %v", err)
	}
	o.stopWork()
	o.working.Wait()
	o.mu.Lock()
	res := orderedResult{Groups: orderedGroups, GaveUp: o.gaveUp}
	enqueued := o.enqueued
	o.mu.Unlock()
	finished := make([][]time.Time, orderedGroups)
	for g := range orderedGroups {
		res.Jobs += enqueued[g]
		finished[g] = make([]time.Time, enqueued[g])
	}
	for j, err := range o.c.ListAll(ctx, client.ListParams{Queue: o.queue, Limit: 1000}) {
		if err != nil {
			v.failf("ordered: list jobs: %v", err)
			return res
		}
		var p orderedPayload
		var g int
		if json.Unmarshal(j.Payload, &p) != nil || p.G == "" {
			v.failf("ordered: job %s has payload %s", j.ID, j.Payload)
			continue
		}
		if _, err := fmt.Sscanf(p.G, "g%d", &g); err != nil || g < 0 || g >= orderedGroups || p.N >= len(finished[g]) {
			continue // enqueued with an unknown outcome: not counted
		}
		if j.State == client.StateCompleted {
			finished[g][p.N] = j.FinishedAt
		}
	}
	for g, times := range finished {
		for n, t := range times {
			switch {
			case t.IsZero():
				res.Unfinished++
			case n > 0 && !times[n-1].IsZero() && t.Before(times[n-1]):
				res.OutOfOrder++
			}
		}
		if i := slices.IndexFunc(times, time.Time.IsZero); i >= 0 {
			v.failf("ordered: group g%d: job %d of %d did not complete", g, i, len(times))
		}
	}
	if res.OutOfOrder > 0 {
		v.failf("ordered: %d jobs finished before a job enqueued ahead of them in their group", res.OutOfOrder)
	}
	if res.Jobs == 0 {
		v.failf("ordered: no job was enqueued")
	}
	return res
}
