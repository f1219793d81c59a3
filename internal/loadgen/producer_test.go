package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestProducerSendsEachCallOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[int64]int{}
	clients := map[int]bool{}
	err := Producer{Clients: 8, Calls: 1000}.Run(context.Background(), func(client int) Sender {
		mu.Lock()
		clients[client] = true
		mu.Unlock()
		return func(_ context.Context, c Call) error {
			mu.Lock()
			seen[c.Index]++
			mu.Unlock()
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1000 || len(clients) != 8 {
		t.Fatalf("%d calls by %d clients, want 1000 by 8", len(seen), len(clients))
	}
	for i, n := range seen {
		if i < 0 || i >= 1000 || n != 1 {
			t.Fatalf("call %d sent %d times", i, n)
		}
	}
}

func TestProducerEndsAtUntil(t *testing.T) {
	t.Parallel()
	began := time.Now()
	var calls atomic.Int64
	p := Producer{Clients: 2, Until: began.Add(100 * time.Millisecond), Pace: time.Millisecond}
	if err := p.Run(context.Background(), func(int) Sender {
		return func(context.Context, Call) error { calls.Add(1); return nil }
	}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 100*time.Millisecond || took > 5*time.Second || calls.Load() == 0 {
		t.Fatalf("ran %v with %d calls", took, calls.Load())
	}
}

func TestProducerStopLetsCallsFinish(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	var started, finished atomic.Int64
	inCall := make(chan struct{}, 4)
	done := make(chan error)
	go func() {
		done <- Producer{Clients: 4, Stop: stop}.Run(context.Background(), func(int) Sender {
			return func(ctx context.Context, _ Call) error {
				started.Add(1)
				inCall <- struct{}{}
				time.Sleep(20 * time.Millisecond)
				if ctx.Err() == nil {
					finished.Add(1)
				}
				return nil
			}
		})
	}()
	<-inCall
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if started.Load() != finished.Load() {
		t.Fatalf("%d calls started, %d finished", started.Load(), finished.Load())
	}
}

// A client still busy when its next call is due measures that call from
// its due time; a free one that waited for the due time measures it from
// its send.
func TestProducerMeasuresLateCallsFromTheirDueTime(t *testing.T) {
	t.Parallel()
	start := time.Now().Add(20 * time.Millisecond)
	dues := []time.Time{start, start, start, start.Add(200 * time.Millisecond)}
	var next atomic.Int64
	schedule := func() (int64, time.Time, bool) {
		i := next.Add(1) - 1
		if i >= int64(len(dues)) {
			return i, time.Time{}, false
		}
		return i, dues[i], true
	}
	got := make([]Call, 0, len(dues))
	sentAt := make([]time.Time, 0, len(dues))
	if err := (Producer{Clients: 1, Schedule: schedule}).Run(context.Background(), func(int) Sender {
		return func(_ context.Context, c Call) error {
			got = append(got, c)
			sentAt = append(sentAt, time.Now())
			time.Sleep(10 * time.Millisecond) // busy past the next due time
			return nil
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(dues) {
		t.Fatalf("%d calls, want %d", len(got), len(dues))
	}
	for i := 1; i < 3; i++ { // sent behind schedule: measured from the due time
		if !got[i].Due.Equal(dues[i]) || !sentAt[i].After(dues[i].Add(5*time.Millisecond)) {
			t.Fatalf("call %d sent %v after due, measured from %v after due; want its due time",
				i, sentAt[i].Sub(dues[i]), got[i].Due.Sub(dues[i]))
		}
	}
	for _, i := range []int{0, 3} { // waited for: measured from the send
		if got[i].Due.Before(dues[i]) || sentAt[i].Sub(got[i].Due) > 5*time.Millisecond {
			t.Fatalf("call %d measured from %v after due, sent %v after due; want its send",
				i, got[i].Due.Sub(dues[i]), sentAt[i].Sub(dues[i]))
		}
	}
}

func TestProducerFollowsSchedule(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var next atomic.Int64
	schedule := func() (int64, time.Time, bool) {
		i := next.Add(1) - 1
		return i, start.Add(time.Duration(i) * 10 * time.Millisecond), i < 10
	}
	var mu sync.Mutex
	var late []time.Duration
	if err := (Producer{Clients: 3, Schedule: schedule}).Run(context.Background(), func(int) Sender {
		return func(_ context.Context, c Call) error {
			mu.Lock()
			late = append(late, time.Since(c.Due))
			mu.Unlock()
			return nil
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(late) != 10 {
		t.Fatalf("%d calls, want 10", len(late))
	}
	for _, d := range late {
		if d < 0 {
			t.Fatalf("a call was sent %v before it was due", -d)
		}
	}
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Fatalf("10 calls due 10 ms apart took %v", took)
	}
}

func TestProducerReturnsFirstSenderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var calls atomic.Int64
	err := Producer{Clients: 2, Calls: 1_000_000}.Run(context.Background(), func(client int) Sender {
		return func(context.Context, Call) error {
			calls.Add(1)
			if client == 0 {
				return boom
			}
			return nil
		}
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d calls: the other client stopped too", calls.Load())
	}
}

func TestProducerEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Producer{Clients: 2, Pace: time.Millisecond}.Run(ctx, func(int) Sender {
		return func(context.Context, Call) error { return nil }
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}
