package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queueSystem is one job queue as its users drive it: its client's enqueue
// calls and its worker running a no-op handler.
type queueSystem interface {
	// Enqueue adds one job through the client's single-job call.
	Enqueue(ctx context.Context, a jobArgs) error
	// EnqueueBatch adds the jobs through the client's bulk call, or returns
	// errUnsupported when the client has none.
	EnqueueBatch(ctx context.Context, as []jobArgs) error
	// Prefill adds n jobs as fast as the client allows; it is not timed.
	Prefill(ctx context.Context, n int) error
	// Work starts a worker with the given number of concurrent handlers that
	// calls started with each job's arguments as its handler begins. The
	// returned stop ends the worker and waits for it.
	Work(ctx context.Context, concurrency int, started func(jobArgs)) (stop func(), err error)
	// Close releases the client's connections.
	Close()
}

// errUnsupported marks a case the system's client offers no call for.
var errUnsupported = errors.New("not offered by this client")

// jobArgs is every job's payload, about 100 bytes of JSON. Sent is the
// Unix time in nanoseconds just before the enqueue call, for the latency.
type jobArgs struct {
	Seq  int64  `json:"seq"`
	Sent int64  `json:"sent"`
	Pad  string `json:"pad"`
}

// pad fills each payload to about 100 bytes.
var pad = strings.Repeat("x", 60)

func newArgs(seq int64) jobArgs {
	return jobArgs{Seq: seq, Sent: time.Now().UnixNano(), Pad: pad}
}

// result is one case's outcome, printed as one JSON line.
type result struct {
	System     string  `json:"system"`
	Case       string  `json:"case"`
	Rep        int     `json:"rep"`
	N          int     `json:"n"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_s,omitempty"`
	P50ms      float64 `json:"p50_ms,omitempty"`
	P99ms      float64 `json:"p99_ms,omitempty"`
	// Rate is the enqueue rate the lat case reached, jobs per second.
	Rate  float64 `json:"rate,omitempty"`
	NA    bool    `json:"na,omitempty"`
	Error string  `json:"error,omitempty"`
}

// caseFunc runs one workload and records its outcome in res.
type caseFunc func(ctx context.Context, sys queueSystem, o *options, res *result) error

// cases are the workloads by name.
var cases = map[string]caseFunc{
	"seq": func(ctx context.Context, s queueSystem, o *options, r *result) error {
		return enqueueCase(ctx, s, o.n, 1, r)
	},
	"conc": func(ctx context.Context, s queueSystem, o *options, r *result) error {
		return enqueueCase(ctx, s, o.n, 50, r)
	},
	"bulk": bulkCase,
	"drain50": func(ctx context.Context, s queueSystem, o *options, r *result) error {
		return drainCase(ctx, s, o.n, 50, r)
	},
	"drain500": func(ctx context.Context, s queueSystem, o *options, r *result) error {
		return drainCase(ctx, s, o.n, 500, r)
	},
	"lat": latencyCase,
}

// batchSize is the number of jobs per bulk call.
const batchSize = 1000

// enqueueCase times n single enqueues spread over the given producers.
func enqueueCase(ctx context.Context, sys queueSystem, n, producers int, res *result) error {
	var next atomic.Int64
	errs := make(chan error, producers)
	start := time.Now()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for {
				seq := next.Add(1)
				if seq > int64(n) {
					return
				}
				if err := sys.Enqueue(ctx, newArgs(seq)); err != nil {
					errs <- fmt.Errorf("enqueue job %d: %w", seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	res.record(n, time.Since(start))
	close(errs)
	return <-errs
}

// bulkCase times n jobs enqueued by one producer in calls of batchSize.
func bulkCase(ctx context.Context, sys queueSystem, o *options, res *result) error {
	start := time.Now()
	if err := prefillInBatches(ctx, o.n, sys.EnqueueBatch); err != nil {
		return err
	}
	res.record(o.n, time.Since(start))
	return nil
}

// prefillInBatches enqueues n jobs through batch in calls of batchSize.
func prefillInBatches(ctx context.Context, n int, batch func(context.Context, []jobArgs) error) error {
	for first := 0; first < n; first += batchSize {
		as := make([]jobArgs, 0, batchSize)
		for seq := first; seq < min(first+batchSize, n); seq++ {
			as = append(as, newArgs(int64(seq)))
		}
		if err := batch(ctx, as); err != nil {
			return fmt.Errorf("enqueue batch at job %d: %w", first, err)
		}
	}
	return nil
}

// drainCase prefills n jobs, then times a worker of the given concurrency
// from its start until its handlers have begun all n.
func drainCase(ctx context.Context, sys queueSystem, n, concurrency int, res *result) error {
	if err := sys.Prefill(ctx, n); err != nil {
		return fmt.Errorf("prefill %d jobs: %w", n, err)
	}
	var handled atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	stop, err := sys.Work(ctx, concurrency, func(jobArgs) {
		if handled.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer stop()
	select {
	case <-done:
		res.record(n, time.Since(start))
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain: %d of %d jobs handled: %w", handled.Load(), n, ctx.Err())
	}
}

// maxInFlight bounds the enqueue calls the lat case keeps open at once.
const maxInFlight = 256

// latencyCase runs a worker of 50 handlers, enqueues at a steady rate, each
// call in its own goroutine so that a slow call does not delay the next,
// and measures from just before each enqueue call to its handler's start.
func latencyCase(ctx context.Context, sys queueSystem, o *options, res *result) error {
	total := int(o.latDuration.Seconds() * float64(o.latRate))
	if total < 1 || o.latRate < 1 {
		return fmt.Errorf("-lat-rate, -lat-duration: %d jobs/s for %s is no job", o.latRate, o.latDuration)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, total)
	done := make(chan struct{})
	stop, err := sys.Work(ctx, 50, func(a jobArgs) {
		d := time.Duration(time.Now().UnixNano() - a.Sent)
		mu.Lock()
		defer mu.Unlock()
		lat = append(lat, d)
		if len(lat) == total {
			close(done)
		}
	})
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer stop()

	interval := time.Second / time.Duration(o.latRate)
	slots := make(chan struct{}, maxInFlight)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("lat: enqueue %d of %d: %w", i, total, ctx.Err())
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := sys.Enqueue(ctx, newArgs(int64(i))); err != nil {
				select {
				case errs <- fmt.Errorf("enqueue job %d: %w", i, err):
				default:
				}
			}
		})
	}
	wg.Wait()
	res.Rate = float64(total) / time.Since(start).Seconds()
	select {
	case err := <-errs:
		return err
	default:
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("lat: handlers began %d of %d jobs: %w", len(lat), total, ctx.Err())
	}
	res.N, res.Seconds = total, time.Since(start).Seconds()
	slices.Sort(lat)
	res.P50ms = ms(lat[len(lat)/2])
	res.P99ms = ms(lat[len(lat)*99/100])
	return nil
}

// record sets the throughput of n jobs over d.
func (r *result) record(n int, d time.Duration) {
	r.N, r.Seconds = n, d.Seconds()
	r.JobsPerSec = float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
