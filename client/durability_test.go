package client_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// A job keeps the level it names, else takes its queue's; a queue's level
// changes only the jobs enqueued after it was set.
func TestDurabilityLevels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, d := range []client.Durability{client.DurabilityFull, client.DurabilityProcess, client.DurabilityMemory} {
		id := b.enqueue(client.EnqueueParams{Queue: "levels", Kind: "k", Durability: d})
		if got := b.get(id).Durability; got != d {
			t.Errorf("job enqueued with %s: durability %q", d, got)
		}
	}
	before := b.enqueue(client.EnqueueParams{Queue: "levels", Kind: "k"})
	if got := b.get(before).Durability; got != client.DurabilityFull {
		t.Errorf("job enqueued without a level: durability %q, want full", got)
	}

	q, err := b.c.SetQueueDurability(b.ctx, "levels", client.DurabilityProcess)
	if err != nil || q.Name != "levels" || q.Durability != client.DurabilityProcess || q.Counts.Available != 4 {
		t.Fatalf("set queue durability: %+v, %v", q, err)
	}
	after := b.enqueue(client.EnqueueParams{Queue: "levels", Kind: "k"})
	if got := b.get(after).Durability; got != client.DurabilityProcess {
		t.Errorf("job enqueued after the queue went to process: durability %q", got)
	}
	if got := b.get(before).Durability; got != client.DurabilityFull {
		t.Errorf("job enqueued before the queue went to process: durability %q, want full", got)
	}
	if q, err := b.c.Queue(b.ctx, "levels"); err != nil || q.Durability != client.DurabilityProcess {
		t.Fatalf("queue after the change: %+v, %v", q, err)
	}

	// A queue that does not exist yet is created with the level.
	if q, err := b.c.SetQueueDurability(b.ctx, "fresh", client.DurabilityMemory); err != nil || q.Durability != client.DurabilityMemory {
		t.Fatalf("set durability of a new queue: %+v, %v", q, err)
	}
	qs, err := b.c.Queues(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	levels := map[string]client.Durability{}
	for _, q := range qs {
		levels[q.Name] = q.Durability
	}
	if len(qs) != 2 || levels["levels"] != client.DurabilityProcess || levels["fresh"] != client.DurabilityMemory {
		t.Fatalf("queues: %+v", qs)
	}
}

func TestDurabilityErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	field := func(err error) string {
		var e *client.Error
		if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalidArgument) {
			return "not an invalid_argument error: " + errorText(err)
		}
		return e.Field
	}
	_, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Kind: "k", Durability: "disk"})
	if f := field(err); f != "durability" {
		t.Errorf("enqueue with an unknown level: field %q", f)
	}
	_, err = b.c.SetQueueDurability(b.ctx, "q", "disk")
	if f := field(err); f != "durability" {
		t.Errorf("queue set to an unknown level: field %q", f)
	}
	_, err = b.c.SetQueueDurability(b.ctx, "q", "")
	if f := field(err); f != "durability" {
		t.Errorf("queue set to no level: field %q", f)
	}
	_, err = b.c.EnqueueBatch(b.ctx, []client.EnqueueParams{
		{Queue: "q", Kind: "k", Durability: client.DurabilityMemory},
		{Queue: "q", Kind: "k", Durability: client.DurabilityFull},
	})
	if f := field(err); f != "jobs" {
		t.Errorf("batch mixing memory and full: field %q", f)
	}
	if _, err := b.c.Queue(b.ctx, "q"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the refused calls created queue q: %v", err)
	}
}

func errorText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// The Batcher keeps memory jobs out of batches with others, whether the
// jobs name their level or take it from their queue, and every call gets
// its own job at its own level.
func TestBatcherKeepsMemoryJobsApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.c.SetQueueDurability(b.ctx, "volatile", client.DurabilityMemory); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		params   []client.EnqueueParams
		want     []client.Durability
		requests int64
	}{
		{
			name: "named levels",
			params: []client.EnqueueParams{
				{Queue: "plain", Kind: "k", Durability: client.DurabilityMemory},
				{Queue: "plain", Kind: "k"},
				{Queue: "plain", Kind: "k", Durability: client.DurabilityMemory},
				{Queue: "plain", Kind: "k", Durability: client.DurabilityProcess},
			},
			want:     []client.Durability{client.DurabilityMemory, client.DurabilityFull, client.DurabilityMemory, client.DurabilityProcess},
			requests: 2, // one batch per tier, sent at once
		},
		{
			name: "queue levels",
			params: []client.EnqueueParams{
				{Queue: "volatile", Kind: "k"},
				{Queue: "plain", Kind: "k"},
				{Queue: "volatile", Kind: "k"},
				{Queue: "plain", Kind: "k"},
			},
			want:     []client.Durability{client.DurabilityMemory, client.DurabilityFull, client.DurabilityMemory, client.DurabilityFull},
			requests: 3, // the mixed batch is refused, then one per queue
		},
	} {
		counter := &countingTransport{}
		c := client.New(b.base, client.WithHTTPClient(&http.Client{Transport: counter}))
		// The batch goes out once all calls joined it, never on the timer.
		bat := client.NewBatcher(c, client.BatcherConfig{MaxDelay: time.Hour, MaxBatch: len(tc.params)})
		ids := make([]string, len(tc.params))
		errs := make([]error, len(tc.params))
		var wg sync.WaitGroup
		for i, p := range tc.params {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := bat.Enqueue(b.ctx, p)
				if err == nil {
					ids[i] = res.ID
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if err := bat.Close(); err != nil {
			t.Fatal(err)
		}
		c.CloseIdleConnections()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: call %d: %v", tc.name, i, err)
			}
			if got := b.get(ids[i]).Durability; got != tc.want[i] {
				t.Errorf("%s: call %d stored a job of durability %q, want %q", tc.name, i, got, tc.want[i])
			}
		}
		if n := counter.n.Load(); n != tc.requests {
			t.Errorf("%s: %d requests, want %d", tc.name, n, tc.requests)
		}
	}
}
