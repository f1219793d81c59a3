package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeQueue hands out numbered jobs and records their acks, and what the
// workers held at most.
type fakeQueue struct {
	mu                 sync.Mutex
	next, jobs         int
	acked              map[int]int
	out, maxOut        int // fetched and not acked
	fetchesWhileHeld   int
	failEvery, fetches int
	// allAcked, when set, is called once every job is acked.
	allAcked func()
}

func newFakeQueue(jobs int) *fakeQueue { return &fakeQueue{jobs: jobs, acked: map[int]int{}} }

func (q *fakeQueue) fetch(_ context.Context, most int) ([]int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fetches++
	if q.failEvery > 0 && q.fetches%q.failEvery == 0 {
		return nil, errors.New("fetch failed")
	}
	if q.out > 0 {
		q.fetchesWhileHeld++
	}
	var out []int
	for len(out) < most && q.next < q.jobs {
		out = append(out, q.next)
		q.next++
	}
	q.out += len(out)
	q.maxOut = max(q.maxOut, q.out)
	if len(out) == 0 {
		time.Sleep(time.Millisecond) // as a long poll would wait
	}
	return out, nil
}

func (q *fakeQueue) ack(_ context.Context, jobs []int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range jobs {
		q.acked[j]++
	}
	q.out -= len(jobs)
	if len(q.acked) == q.jobs && q.allAcked != nil {
		q.allAcked()
	}
	return nil
}

func (q *fakeQueue) allAckedOnce(t *testing.T, want int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.acked) != want {
		t.Fatalf("%d jobs acked, want %d", len(q.acked), want)
	}
	for j, n := range q.acked {
		if n != 1 {
			t.Fatalf("job %d acked %d times", j, n)
		}
	}
}

func TestWorkersShareABudget(t *testing.T) {
	t.Parallel()
	q := newFakeQueue(100_000)
	q.failEvery = 7
	b := NewBudget(5_003)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Worker[int]{Concurrency: 100, Budget: b, Fetch: q.fetch, Ack: q.ack}.Run(context.Background())
		}()
	}
	wg.Wait()
	q.allAckedOnce(t, 5_003)
	if q.maxOut > 400 {
		t.Fatalf("4 workers of 100 held %d jobs at most", q.maxOut)
	}
}

func TestWorkerOverlapBoundsHeldJobs(t *testing.T) {
	t.Parallel()
	q := newFakeQueue(3_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.allAcked = cancel
	slowAck := func(ctx context.Context, jobs []int) error {
		time.Sleep(time.Millisecond)
		return q.ack(ctx, jobs)
	}
	Worker[int]{Concurrency: 50, Overlap: true, Work: time.Millisecond, Fetch: q.fetch, Ack: slowAck}.Run(ctx)
	q.allAckedOnce(t, 3_000)
	if q.maxOut > 100 {
		t.Fatalf("held %d jobs at most, want at most 2 × 50", q.maxOut)
	}
}

func TestWorkerStopAcksHeldJobs(t *testing.T) {
	t.Parallel()
	q := newFakeQueue(1_000_000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Worker[int]{Concurrency: 20, Overlap: true, Work: 30 * time.Millisecond, Fetch: q.fetch, Ack: q.ack, Stop: stop}.Run(context.Background())
	}()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not end after Stop")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.out != 0 || q.next == 0 || len(q.acked) != q.next {
		t.Fatalf("after Stop: %d fetched, %d acked, %d held", q.next, len(q.acked), q.out)
	}
}

func TestWorkerEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	idle := func(ctx context.Context, _ int) ([]int, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Worker[int]{Concurrency: 5, Fetch: idle, Ack: func(context.Context, []int) error { return nil }}.Run(ctx)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not end with its context")
	}
}

func TestWorkerRunsAtMostConcurrencyJobs(t *testing.T) {
	t.Parallel()
	q := newFakeQueue(400)
	var running, peak atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.allAcked = cancel
	fetch := func(ctx context.Context, most int) ([]int, error) {
		jobs, err := q.fetch(ctx, most)
		for range jobs {
			if n := running.Add(1); n > peak.Load() {
				peak.Store(n)
			}
		}
		return jobs, err
	}
	ack := func(ctx context.Context, jobs []int) error {
		running.Add(-int64(len(jobs)))
		return q.ack(ctx, jobs)
	}
	Worker[int]{Concurrency: 10, Work: time.Millisecond, Fetch: fetch, Ack: ack}.Run(ctx)
	q.allAckedOnce(t, 400)
	if peak.Load() > 10 || q.fetchesWhileHeld != 0 {
		t.Fatalf("without overlap: %d jobs held at once (want at most 10), %d fetches while jobs were held", peak.Load(), q.fetchesWhileHeld)
	}
}
