package loadgen

import (
	"context"
	"errors"
	"sync"
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

// check fails the test unless want jobs were acked, each once, and the
// workers never held more than maxHeld jobs at once.
func (q *fakeQueue) check(t *testing.T, want, maxHeld int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.acked) != want || q.maxOut > maxHeld {
		t.Fatalf("%d jobs acked, want %d; %d held at most, want at most %d", len(q.acked), want, q.maxOut, maxHeld)
	}
	for j, n := range q.acked {
		if n != 1 {
			t.Fatalf("job %d acked %d times", j, n)
		}
	}
}

// runUntilAllAcked runs w until every job of q is acked.
func runUntilAllAcked(q *fakeQueue, w Worker[int]) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.allAcked = cancel
	w.Run(ctx)
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
	q.check(t, 5_003, 4*100)
}

func TestWorkerOverlapBoundsHeldJobs(t *testing.T) {
	t.Parallel()
	q := newFakeQueue(3_000)
	slowAck := func(ctx context.Context, jobs []int) error {
		time.Sleep(time.Millisecond)
		return q.ack(ctx, jobs)
	}
	runUntilAllAcked(q, Worker[int]{Concurrency: 50, Overlap: true, Work: time.Millisecond, Fetch: q.fetch, Ack: slowAck})
	q.check(t, 3_000, 2*50)
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
	runUntilAllAcked(q, Worker[int]{Concurrency: 10, Work: time.Millisecond, Fetch: q.fetch, Ack: q.ack})
	q.check(t, 400, 10)
	if q.fetchesWhileHeld != 0 {
		t.Fatalf("without overlap: %d fetches while jobs were held", q.fetchesWhileHeld)
	}
}
