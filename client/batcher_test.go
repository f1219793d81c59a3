package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// countingTransport counts the requests a client sends.
type countingTransport struct {
	n atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// Concurrent enqueues share requests, each gets its own job, and a bad job
// fails only its own call.
func TestBatcherSharesRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counter := &countingTransport{}
	c := client.New(b.base, client.WithHTTPClient(&http.Client{Transport: counter}))
	bat := client.NewBatcher(c, client.BatcherConfig{MaxDelay: 20 * time.Millisecond, MaxBatch: 500})
	const calls = 300
	var wg sync.WaitGroup
	ids := make([]string, calls)
	errs := make([]error, calls)
	start := make(chan struct{})
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			kind := "k"
			if i%100 == 7 {
				kind = "bad kind" // refused: fails this call alone
			}
			res, err := bat.Enqueue(b.ctx, client.EnqueueParams{Queue: "hot", Kind: kind, Payload: map[string]int{"n": i}})
			if err == nil {
				ids[i] = res.ID
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	if err := bat.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, err := range errs {
		if i%100 == 7 {
			var e *client.Error
			if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalidArgument) || e.Field != "kind" {
				t.Fatalf("call %d with a bad kind: %v", i, err)
			}
			continue
		}
		if err != nil || ids[i] == "" || seen[ids[i]] {
			t.Fatalf("call %d: id %q, %v", i, ids[i], err)
		}
		seen[ids[i]] = true
	}
	if n := counter.n.Load(); n > calls/10 {
		t.Fatalf("%d calls took %d requests", calls, n)
	}
	q, err := b.c.Queue(b.ctx, "hot")
	if err != nil || q.Counts.Available != calls-3 {
		t.Fatalf("queue after the batches: %+v %v", q, err)
	}
	for i := 0; i < calls; i += 37 {
		if i%100 == 7 {
			continue
		}
		j := b.get(ids[i])
		if string(j.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("job of call %d has payload %s", i, j.Payload)
		}
	}
}

// A call whose context ends before its batch goes out is left out; a full
// batch goes at once; after Close calls are refused.
func TestBatcherContextAndClose(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		bat := client.NewBatcher(b.c, client.BatcherConfig{MaxDelay: time.Hour, MaxBatch: 2})
		gone, cancel := context.WithCancel(b.ctx)
		cancel()
		done := make(chan error, 2)
		go func() {
			_, err := bat.Enqueue(gone, client.EnqueueParams{Queue: "c", Kind: "k"})
			done <- err
		}()
		go func() {
			_, err := bat.Enqueue(b.ctx, client.EnqueueParams{Queue: "c", Kind: "k"})
			done <- err
		}()
		var cancelled, stored int
		for i := 0; i < 2; i++ {
			switch err := <-done; {
			case err == nil:
				stored++
			case errors.Is(err, context.Canceled):
				cancelled++
			default:
				t.Fatalf("call: %v", err)
			}
		}
		if cancelled != 1 || stored != 1 {
			t.Fatalf("%d cancelled, %d stored", cancelled, stored)
		}
		if err := bat.Close(); err != nil {
			t.Fatal(err)
		}
		if q, err := b.c.Queue(b.ctx, "c"); err != nil || q.Counts.Available != 1 {
			t.Fatalf("queue: %+v %v", q, err)
		}
		if _, err := bat.Enqueue(b.ctx, client.EnqueueParams{Queue: "c", Kind: "k"}); !errors.Is(err, client.ErrBatcherClosed) {
			t.Fatalf("enqueue after close: %v", err)
		}
	})
}
