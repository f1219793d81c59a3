package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// runWorker starts w.Run in a goroutine and returns a channel with its
// result. The test's cleanup stops the worker if the test did not.
func runWorker(t *testing.T, w *client.Worker) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return done
}

// stopWorker stops w gracefully and checks that Run returned nil.
func stopWorker(t *testing.T, w *client.Worker, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := recv(t, done, 5*time.Second, "Run to return"); err != nil {
		t.Fatalf("run: %v", err)
	}
}

func (b *bundle) worker(cfg client.WorkerConfig) *client.Worker {
	cfg.Logger = quietLogger()
	cfg.Wait = time.Second
	return client.NewWorker(b.c, cfg)
}

func TestWorkerRunsHandlersAndAcksResults(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		const n = 20
		var ids []string
		for i := 0; i < n; i++ {
			ids = append(ids, b.enqueue(client.EnqueueParams{Queue: "w", Kind: "double", Payload: i}))
		}
		w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 4, Name: "test-worker"})
		handled := make(chan struct{}, n)
		w.Handle("double", func(ctx context.Context, j *client.Job) (any, error) {
			var x int
			if err := json.Unmarshal(j.Payload, &x); err != nil {
				return nil, client.NoRetry(err)
			}
			handled <- struct{}{}
			return map[string]int{"double": 2 * x}, nil
		})
		done := runWorker(t, w)
		for i := 0; i < n; i++ {
			recv(t, handled, 10*time.Second, "the handlers")
		}
		for i, id := range ids {
			j := b.waitState(id, client.StateCompleted, 5*time.Second)
			if string(j.Result) != fmt.Sprintf(`{"double":%d}`, 2*i) || j.Attempt != 1 {
				t.Fatalf("job %d: result %s attempt %d", i, j.Result, j.Attempt)
			}
		}
		stopWorker(t, w, done)
	})
}

func TestWorkerFailingHandlerRetriesThenDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "flaky", MaxAttempts: 3,
		Backoff: &client.Backoff{Type: client.BackoffFixed, Base: 10 * time.Millisecond}})
	noRetry := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "hopeless", MaxAttempts: 5})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}})
	var calls atomic.Int32
	w.Handle("flaky", func(ctx context.Context, j *client.Job) (any, error) {
		calls.Add(1)
		return nil, fmt.Errorf("boom %d", j.Attempt)
	})
	w.Handle("hopeless", func(ctx context.Context, j *client.Job) (any, error) {
		return "ignored", client.NoRetry(errors.New("bad input"))
	})
	done := runWorker(t, w)
	j := b.waitState(id, client.StateDead, 10*time.Second)
	if calls.Load() != 3 || len(j.Errors) != 3 || j.Errors[2].Message != "boom 3" || j.Errors[2].Attempt != 3 {
		t.Fatalf("dead job after %d calls: %+v", calls.Load(), j.Errors)
	}
	j = b.waitState(noRetry, client.StateDead, 5*time.Second)
	if j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Message != "bad input" {
		t.Fatalf("job failed with NoRetry: %+v", j)
	}
	stopWorker(t, w, done)
}

func TestWorkerRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "later"})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}})
	w.Handle("later", func(ctx context.Context, j *client.Job) (any, error) {
		return nil, client.RetryAfter(errors.New("come back later"), time.Hour)
	})
	done := runWorker(t, w)
	j := b.waitState(id, client.StateRetrying, 5*time.Second)
	if time.Until(j.RunAt) < 59*time.Minute {
		t.Fatalf("retry at %v, want an hour from now", j.RunAt)
	}
	stopWorker(t, w, done)
}

func TestWorkerPanicBecomesFailAndWorkerGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "panicky", MaxAttempts: 3,
		Backoff: &client.Backoff{Type: client.BackoffFixed}})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 1})
	w.Handle("panicky", func(ctx context.Context, j *client.Job) (any, error) {
		if j.Attempt == 1 {
			panic("kaboom")
		}
		return "survived", nil
	})
	w.Handle("plain", func(ctx context.Context, j *client.Job) (any, error) { return "ok", nil })
	done := runWorker(t, w)
	j := b.waitState(id, client.StateCompleted, 10*time.Second)
	if j.Attempt != 2 || len(j.Errors) != 1 || string(j.Result) != `"survived"` {
		t.Fatalf("job after a panic: %+v", j)
	}
	msg := j.Errors[0].Message
	if !strings.HasPrefix(msg, "panic: kaboom") || !strings.Contains(msg, "goroutine") || len(msg) > 10<<10 {
		t.Fatalf("panic error (%d bytes): %q", len(msg), msg)
	}
	// The worker goes on with other jobs.
	b.waitState(b.enqueue(client.EnqueueParams{Queue: "w", Kind: "plain"}), client.StateCompleted, 10*time.Second)
	stopWorker(t, w, done)
}

func TestWorkerFailsJobsWithoutHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "unknown", MaxAttempts: 1})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Name: "w-7"})
	w.Handle("known", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	done := runWorker(t, w)
	j := b.waitState(id, client.StateDead, 10*time.Second)
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, `no handler for kind "unknown" on worker w-7`) {
		t.Fatalf("job without handler: %+v", j.Errors)
	}
	stopWorker(t, w, done)
}

func TestWorkerHeartbeatKeepsLeaseAlive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "slow", Lease: 300 * time.Millisecond})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}})
	w.Handle("slow", func(ctx context.Context, j *client.Job) (any, error) {
		select {
		case <-time.After(time.Second):
			return "done", nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	done := runWorker(t, w)
	j := b.waitState(id, client.StateCompleted, 10*time.Second)
	if j.Attempt != 1 || len(j.Errors) != 0 || string(j.Result) != `"done"` {
		t.Fatalf("job that outlived its lease: attempt %d errors %+v", j.Attempt, j.Errors)
	}
	stopWorker(t, w, done)
}

func TestWorkerCancelReachesHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "long", Lease: 300 * time.Millisecond})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}})
	started := make(chan struct{})
	cause := make(chan error, 1)
	w.Handle("long", func(ctx context.Context, j *client.Job) (any, error) {
		close(started)
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			cause <- nil
			return "not cancelled", nil
		}
	})
	done := runWorker(t, w)
	recv(t, started, 10*time.Second, "the handler to start")
	if _, err := b.c.Cancel(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, cause, 5*time.Second, "the cancellation"); !errors.Is(err, client.ErrJobCancelled) {
		t.Fatalf("handler's context cause: %v", err)
	}
	b.waitState(id, client.StateCancelled, 5*time.Second)
	stopWorker(t, w, done)
}

func TestWorkerLeaseLostCancelsHandlerAndDropsResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k", Lease: 200 * time.Millisecond})
	// Heartbeats far apart: the lease runs out first, the server hands the
	// job out again (to this worker), and the next heartbeat learns that
	// the first hand-out is lost.
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 2, HeartbeatInterval: 1500 * time.Millisecond})
	cause := make(chan error, 1)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		if j.Attempt > 1 {
			return fmt.Sprintf("attempt %d", j.Attempt), nil
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return "stale result", nil
	})
	done := runWorker(t, w)
	if err := recv(t, cause, 10*time.Second, "the lease loss"); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("handler's context cause: %v", err)
	}
	j := b.waitState(id, client.StateCompleted, 5*time.Second)
	if string(j.Result) != `"attempt 2"` || j.Attempt != 2 {
		t.Fatalf("job: result %s attempt %d", j.Result, j.Attempt)
	}
	stopWorker(t, w, done)
}

func TestWorkerStopReleasesUnfinishedJobs(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		quick := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "quick"})
		stuck := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "stuck"})
		w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 2})
		started := make(chan string, 2)
		stuckCause := make(chan error, 1)
		w.Handle("quick", func(ctx context.Context, j *client.Job) (any, error) {
			started <- "quick"
			time.Sleep(150 * time.Millisecond)
			return "finished", nil
		})
		w.Handle("stuck", func(ctx context.Context, j *client.Job) (any, error) {
			started <- "stuck"
			<-ctx.Done()
			stuckCause <- context.Cause(ctx)
			return nil, ctx.Err()
		})
		done := runWorker(t, w)
		recv(t, started, 10*time.Second, "a handler to start")
		recv(t, started, 10*time.Second, "both handlers to start")

		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		err := w.Stop(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "released 1 unfinished jobs") {
			t.Fatalf("stop: %v", err)
		}
		if err := recv(t, done, time.Second, "Run to return"); err != nil {
			t.Fatalf("run: %v", err)
		}
		if err := recv(t, stuckCause, time.Second, "the stuck handler to be cancelled"); !errors.Is(err, client.ErrWorkerStopped) {
			t.Fatalf("stuck handler's cause: %v", err)
		}
		// Stop returned only after the finished job was acked and the
		// unfinished one released, attempt given back.
		if j := b.get(quick); j.State != client.StateCompleted || string(j.Result) != `"finished"` {
			t.Fatalf("quick job: %+v", j)
		}
		if j := b.get(stuck); j.State != client.StateAvailable || j.Attempt != 0 || len(j.Errors) != 0 || j.Lease != nil {
			t.Fatalf("stuck job: %+v", j)
		}
		if err := w.Stop(ctx); err != nil && !strings.Contains(err.Error(), "released 1") {
			t.Fatalf("second stop: %v", err)
		}
	})
}

func TestWorkerStopWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "k"})
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, ShutdownTimeout: 10 * time.Second})
	started := make(chan struct{})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		close(started)
		select {
		case <-time.After(300 * time.Millisecond):
			return "whole", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ctx, cancelRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	recv(t, started, 10*time.Second, "the handler to start")
	cancelRun() // Run's own context ending stops the worker gracefully
	if err := recv(t, done, 5*time.Second, "Run to return"); err != nil {
		t.Fatalf("run: %v", err)
	}
	if j := b.get(id); j.State != client.StateCompleted || string(j.Result) != `"whole"` {
		t.Fatalf("job after a graceful stop: %+v", j)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatalf("stop after Run returned: %v", err)
	}
}

func TestWorkerRespectsConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, limit = 15, 3
	ps := make([]client.EnqueueParams, n)
	for i := range ps {
		ps[i] = client.EnqueueParams{Queue: "w", Kind: "k"}
	}
	if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: limit, FetchMax: 100})
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
	for i := 0; i < n; i++ {
		recv(t, finished, 10*time.Second, "the handlers")
	}
	stopWorker(t, w, done)
	if p := peak.Load(); p > limit || p < 1 {
		t.Fatalf("%d handlers ran at once, limit %d", p, limit)
	}
	if q, err := b.c.Queue(b.ctx, "w"); err != nil || q.Counts.Completed != n {
		t.Fatalf("queue after the run: %+v, %v", q, err)
	}
}

func TestWorkerBacksOffWhenFetchFails(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"shutting down"}}`))
	}))
	defer srv.Close()
	w := client.NewWorker(client.New(srv.URL), client.WorkerConfig{Logger: quietLogger()})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	done := runWorker(t, w)
	time.Sleep(time.Second) // the thing under test is what happens over time
	stopWorker(t, w, done)
	// Backoff from 100 ms doubling: about 4-6 tries in a second, never a spin.
	if n := fetches.Load(); n < 2 || n > 12 {
		t.Fatalf("%d fetches in a second against a failing server", n)
	}
}

func TestWorkerRunErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := b.worker(client.WorkerConfig{}).Run(ctx); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("run without handlers: %v", err)
	}

	w := b.worker(client.WorkerConfig{})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("stop before run: %v", err)
	}
	if err := w.Run(ctx); !errors.Is(err, client.ErrWorkerStopped) {
		t.Fatalf("run after stop: %v", err)
	}

	w = b.worker(client.WorkerConfig{Queues: []string{"bad queue!"}})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	if err := w.Run(ctx); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("run with a bad queue name: %v", err)
	}
	if err := w.Run(ctx); err == nil {
		t.Fatal("a worker ran twice")
	}

	defer func() {
		if recover() == nil {
			t.Fatal("registering a kind twice did not panic")
		}
	}()
	w = b.worker(client.WorkerConfig{})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
}

// TestWorkerLeavesNoGoroutines is not parallel: it counts the goroutines
// running this package's code, which other tests' workers would add to.
// Sequential tests run before the parallel ones resume.
func TestWorkerLeavesNoGoroutines(t *testing.T) {
	b := setup(t)
	for i := 0; i < 5; i++ {
		b.enqueue(client.EnqueueParams{Queue: "g", Kind: "quick"})
	}
	b.enqueue(client.EnqueueParams{Queue: "g", Kind: "stuck", Lease: 300 * time.Millisecond})
	w := b.worker(client.WorkerConfig{Queues: []string{"g"}, Concurrency: 3})
	var wg sync.WaitGroup
	stuck := make(chan struct{})
	w.Handle("quick", func(ctx context.Context, j *client.Job) (any, error) { return nil, nil })
	w.Handle("stuck", func(ctx context.Context, j *client.Job) (any, error) {
		wg.Add(1)
		defer wg.Done()
		close(stuck)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	recv(t, stuck, 10*time.Second, "the stuck handler")
	if clientGoroutines() == "" {
		t.Fatal("the check sees no goroutines of a running worker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = w.Stop(ctx)
	if err := recv(t, done, 5*time.Second, "Run to return"); err != nil {
		t.Fatal(err)
	}
	wg.Wait() // the cancelled handler returns; its goroutine is the last one
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := clientGoroutines()
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Run returned:\n%s", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clientGoroutines returns the stacks of goroutines running code of package
// client (not client_test).
func clientGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "spoolq/spool/client.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// A Worker holds at most four times its concurrency in jobs, counting those
// whose outcome waits to be answered: with every outcome held unsent, it
// fetches until it holds that many and then fetches no more. The held
// outcomes go when it stops.
func TestWorkerHoldsAtMostFourTimesItsConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, concurrency, bound = 100, 5, 4 * 5
	ps := make([]client.EnqueueParams, n)
	for i := range ps {
		ps[i] = client.EnqueueParams{Queue: "bound", Kind: "k"}
	}
	if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
		t.Fatal(err)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"bound"}, Concurrency: concurrency, Wait: 50 * time.Millisecond})
	client.HoldOutcomes(w, n) // no outcome goes before the stop
	var handled atomic.Int32
	reached := make(chan struct{})
	w.Handle("k", func(context.Context, *client.Job) (any, error) {
		if handled.Add(1) == bound {
			close(reached)
		}
		return nil, nil
	})
	done := runWorker(t, w)
	recv(t, reached, 10*time.Second, "the handlers of the bound")
	// Long enough for many more fetches, had the bound let them through.
	time.Sleep(300 * time.Millisecond)
	if h := handled.Load(); h != bound {
		t.Fatalf("%d jobs handled with no outcome answered, want the bound %d", h, bound)
	}
	if q, err := b.c.Queue(b.ctx, "bound"); err != nil || q.Counts.Active != bound {
		t.Fatalf("queue while the outcomes wait: %+v, %v; want %d active", q, err, bound)
	}
	stopWorker(t, w, done)
	b.waitFinished("bound", bound, 0, 10*time.Second)
}
