package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// Traceparents the tests give their jobs.
const (
	traceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	traceC = "00-11111111111111111111111111111111-2222222222222222-01"
)

// A job enqueued with a context that carries a traceparent, and none of
// its own, carries the context's; one of its own wins. Batches and
// transactions do the same, job by job.
func TestEnqueueTakesTheContextsTraceParent(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		ctx := client.WithTraceParent(b.ctx, traceA)
		if got := client.TraceParentFrom(ctx); got != traceA {
			t.Fatalf("TraceParentFrom: %q", got)
		}
		if got := client.TraceParentFrom(client.WithTraceParent(ctx, "")); got != "" {
			t.Fatalf("a cleared traceparent reads %q", got)
		}
		single, err := b.c.Enqueue(ctx, client.EnqueueParams{Queue: "t", Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		own, err := b.c.Enqueue(ctx, client.EnqueueParams{Queue: "t", Kind: "k", TraceParent: traceB})
		if err != nil {
			t.Fatal(err)
		}
		none := b.enqueue(client.EnqueueParams{Queue: "t", Kind: "k"})
		batch, err := b.c.EnqueueBatch(ctx, []client.EnqueueParams{{Queue: "t", Kind: "k"}, {Queue: "t", Kind: "k", TraceParent: traceB}})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := b.c.Transact(ctx, client.Transaction{Enqueue: []client.EnqueueParams{{Queue: "t", Kind: "k"}}})
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]string{single.ID: traceA, own.ID: traceB, none: "", batch[0].ID: traceA,
			batch[1].ID: traceB, tx.Jobs[0].ID: traceA} {
			if got := b.get(id).TraceParent; got != want {
				t.Errorf("job %s has traceparent %q, want %q", id, got, want)
			}
		}
	})
}

// A traceparent that is not one is refused, naming the field, and
// nothing is stored.
func TestEnqueueRefusesABadTraceParent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tp := range []string{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "01" + traceA[2:], traceA + "-00", "nope"} {
		_, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "t", Kind: "k", TraceParent: tp})
		var apiErr *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Field != "traceparent" {
			t.Errorf("traceparent %q: %v, want invalid_argument naming traceparent", tp, err)
		}
		_, err = b.c.Enqueue(client.WithTraceParent(b.ctx, tp), client.EnqueueParams{Queue: "t", Kind: "k"})
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("traceparent %q from the context: %v, want invalid_argument", tp, err)
		}
	}
	if q, err := b.c.Queue(b.ctx, "t"); err == nil && q.Counts.Available != 0 {
		t.Fatalf("refused enqueues stored %d jobs", q.Counts.Available)
	}
}

// A worker's handler gets its job's traceparent in its context, or none
// when the job has none, whatever Run's context carries, so that the jobs
// it enqueues continue its job's trace; the job shows which worker ran it.
func TestWorkerHandsTheJobsTraceParentToItsHandler(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		traced := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "parent", TraceParent: traceA})
		plain := b.enqueue(client.EnqueueParams{Queue: "w", Kind: "parent"})
		w := b.worker(client.WorkerConfig{Queues: []string{"w"}, Concurrency: 2, Name: "tracer-1"})
		type seen struct{ id, tp, child string }
		got := make(chan seen, 2)
		w.Handle("parent", func(ctx context.Context, j *client.Job) (any, error) {
			res, err := b.c.Enqueue(ctx, client.EnqueueParams{Queue: "children", Kind: "child"})
			if err != nil {
				return nil, err
			}
			got <- seen{j.ID, client.TraceParentFrom(ctx), res.ID}
			return nil, nil
		})
		done := make(chan error, 1)
		// Run's context carries a trace of its own, which no handler sees.
		go func() { done <- w.Run(client.WithTraceParent(context.Background(), traceC)) }()
		want := map[string]string{traced: traceA, plain: ""}
		for range 2 {
			s := recv(t, got, 10*time.Second, "the handlers")
			if s.tp != want[s.id] {
				t.Errorf("the handler of %s saw traceparent %q, want %q", s.id, s.tp, want[s.id])
			}
			if child := b.get(s.child); child.TraceParent != want[s.id] {
				t.Errorf("the job enqueued by the handler of %s has traceparent %q, want %q", s.id, child.TraceParent, want[s.id])
			}
		}
		for _, id := range []string{traced, plain} {
			if j := b.waitState(id, client.StateCompleted, 5*time.Second); j.Worker != "tracer-1" || j.TraceParent != want[id] {
				t.Errorf("job %s after its run: worker %q, traceparent %q", id, j.Worker, j.TraceParent)
			}
		}
		stopWorker(t, w, done)
	})
}

// Workers lists who fetched and what each holds; List with Worker lists
// that, active jobs only.
func TestWorkersAndWhatTheyHold(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		for range 3 {
			b.enqueue(client.EnqueueParams{Queue: "held", Kind: "k"})
		}
		if _, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"held"}, Max: 2, Worker: "w-2"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"held"}, Max: 2, Worker: "w-1"}); err != nil {
			t.Fatal(err)
		}
		ws, err := b.c.Workers(b.ctx)
		if err != nil || len(ws) != 2 || ws[0].Name != "w-1" || ws[0].Active != 1 || ws[1].Name != "w-2" || ws[1].Active != 2 ||
			ws[1].FirstSeenAt.IsZero() || ws[1].LastSeenAt.Before(ws[1].FirstSeenAt) {
			t.Fatalf("workers %+v, %v", ws, err)
		}
		page, err := b.c.List(b.ctx, client.ListParams{State: client.StateActive, Worker: "w-2"})
		if err != nil || len(page.Jobs) != 2 || page.Jobs[0].Worker != "w-2" || page.Jobs[1].Worker != "w-2" {
			t.Fatalf("the jobs of w-2: %+v, %v", page, err)
		}
		if _, err := b.c.List(b.ctx, client.ListParams{Worker: "w-2"}); !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("a listing by worker of every state: %v, want invalid_argument", err)
		}
	})
}
