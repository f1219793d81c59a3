package client_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// A transaction acks, fails and enqueues at once over each transport, and
// a refused one changes nothing and names the item at fault.
func TestTransact(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		for range 4 {
			b.enqueue(client.EnqueueParams{Queue: "tx", Kind: "k", MaxAttempts: 3})
		}
		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"tx"}, Max: 4})
		if err != nil || len(jobs) != 4 {
			t.Fatalf("fetch: %d jobs, %v", len(jobs), err)
		}
		b.enqueue(client.EnqueueParams{ID: "elsewhere", Queue: "other", Kind: "k"})

		_, err = b.c.Transact(b.ctx, client.Transaction{
			Ack:     []client.AckItem{{ID: jobs[0].ID, Token: jobs[0].Token()}, {ID: jobs[1].ID, Token: jobs[1].Token() + 1}},
			Enqueue: []client.EnqueueParams{{ID: "next-0", Queue: "next", Kind: "k"}},
		})
		var apiErr *client.Error
		if !errors.Is(err, client.ErrLeaseLost) || !errors.As(err, &apiErr) || apiErr.Field != "ack[1].token" || apiErr.Status != http.StatusConflict {
			t.Fatalf("a stale token: %v, want lease_lost on ack[1].token", err)
		}
		_, err = b.c.Transact(b.ctx, client.Transaction{
			Fail: []client.FailItem{{ID: "nosuchjob", Token: 1}},
		})
		if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &apiErr) || apiErr.Field != "fail[0].id" {
			t.Fatalf("an unknown job: %v, want not_found on fail[0].id", err)
		}
		_, err = b.c.Transact(b.ctx, client.Transaction{
			Ack:     []client.AckItem{{ID: jobs[0].ID, Token: jobs[0].Token()}},
			Enqueue: []client.EnqueueParams{{ID: "next-0", Queue: "next", Kind: "k"}, {ID: "elsewhere", Queue: "next", Kind: "k"}},
		})
		if !errors.Is(err, client.ErrIDTaken) || !errors.As(err, &apiErr) || apiErr.Field != "enqueue[1].id" {
			t.Fatalf("an id of another queue: %v, want id_taken on enqueue[1].id", err)
		}
		_, err = b.c.Transact(b.ctx, client.Transaction{})
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("an empty transaction: %v, want invalid_argument", err)
		}
		if j := b.get(jobs[0].ID); j.State != client.StateActive {
			t.Fatalf("the job acked by refused transactions is %s", j.State)
		}
		if _, err := b.c.Get(b.ctx, "next-0"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("the job enqueued by refused transactions: %v, want not found", err)
		}

		res, err := b.c.Transact(b.ctx, client.Transaction{
			Ack: []client.AckItem{{ID: jobs[0].ID, Token: jobs[0].Token(), Result: map[string]int{"rows": 3}}},
			Fail: []client.FailItem{
				{ID: jobs[1].ID, Token: jobs[1].Token(), Error: "later", RetryAfter: time.Hour},
				{ID: jobs[2].ID, Token: jobs[2].Token(), Error: "never", NoRetry: true},
			},
			Enqueue: []client.EnqueueParams{
				{ID: "next-0", Queue: "next", Kind: "k", Payload: map[string]string{"from": jobs[0].ID}},
				{ID: "elsewhere", Queue: "other", Kind: "k"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Acked) != 1 || res.Acked[0].ID != jobs[0].ID || res.Acked[0].State != client.StateCompleted || res.Acked[0].Err != nil {
			t.Fatalf("acked: %+v", res.Acked)
		}
		if len(res.Failed) != 2 || res.Failed[0].State != client.StateRetrying || time.Until(res.Failed[0].RunAt) < 59*time.Minute ||
			res.Failed[1].State != client.StateDead {
			t.Fatalf("failed: %+v", res.Failed)
		}
		if len(res.Jobs) != 2 || res.Jobs[0].ID != "next-0" || res.Jobs[0].Duplicate || res.Jobs[0].State != client.StateAvailable ||
			!res.Jobs[1].Duplicate {
			t.Fatalf("jobs: %+v", res.Jobs)
		}
		if j := b.get(jobs[0].ID); j.State != client.StateCompleted || string(j.Result) != `{"rows":3}` {
			t.Fatalf("acked job: %s, result %s", j.State, j.Result)
		}
		if j := b.fetchOne("next"); j.ID != "next-0" {
			t.Fatalf("fetched %s, want the enqueued job", j.ID)
		}
		// The transaction already took effect: sent again, its ack is lost.
		if _, err := b.c.Transact(b.ctx, client.Transaction{Ack: []client.AckItem{{ID: jobs[0].ID, Token: jobs[0].Token()}}}); !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("the ack sent again: %v, want lease_lost", err)
		}
	})
}
