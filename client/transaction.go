package client

import (
	"context"
	"fmt"
	"net/http"
)

// Transaction is what Transact applies at once: leased jobs to ack and to
// fail, and jobs to enqueue. Any of the three may be empty, but not all.
type Transaction struct {
	// Ack are the jobs to complete, as AckBatch takes them.
	Ack []AckItem
	// Fail are the failed attempts, as FailBatch takes them.
	Fail []FailItem
	// Enqueue are the jobs to add, as EnqueueBatch takes them.
	Enqueue []EnqueueParams
}

// TransactionResult is what a transaction did, item by item in the order
// of its Transaction. Every item was applied: a refused item fails the
// whole call, so no result carries an Err.
type TransactionResult struct {
	// Acked are the outcomes of the acks.
	Acked []AckResult `json:"acked"`
	// Failed are the outcomes of the failed attempts.
	Failed []FailResult `json:"failed"`
	// Jobs are the enqueued jobs; Duplicate is set for a job whose id or
	// unique key matched an existing one.
	Jobs []EnqueueResult `json:"jobs"`
}

// Transact acks and fails leased jobs and enqueues jobs in one call
// (POST /v1/transactions), atomically: all of it or, on any error,
// nothing. It is how a worker hands on a job's follow-ups so that a crash
// can neither lose them nor run them twice.
//
// Every ack and fail item is checked first: an unknown job fails the call
// with an error matching ErrNotFound, a token that is not current with one
// matching ErrLeaseLost, and Error.Field names the item ("ack[2].token",
// "fail[0].id"). The jobs to enqueue follow EnqueueBatch's rules after the
// acks and fails; an id of a job of another queue gives ErrIDTaken with
// Field "enqueue[1].id". A job named by two items, or any invalid field,
// gives ErrInvalidArgument naming it. With the embedded store, a
// transaction may not name both a job of DurabilityMemory and one of
// another level (ErrInvalidArgument). With auth on, the token needs the
// rights of both a worker and a producer (an admin token).
func (c *Client) Transact(ctx context.Context, tx Transaction) (*TransactionResult, error) {
	body := struct {
		Ack     []wireAck      `json:"ack,omitempty"`
		Fail    []wireFail     `json:"fail,omitempty"`
		Enqueue []*wireEnqueue `json:"enqueue,omitempty"`
	}{}
	for i, it := range tx.Ack {
		raw, err := marshalValue(it.Result)
		if err != nil {
			return nil, fmt.Errorf("transact: ack[%d]: encode result: %w", i, err)
		}
		body.Ack = append(body.Ack, wireAck{ID: it.ID, Token: it.Token, Result: raw})
	}
	for _, it := range tx.Fail {
		body.Fail = append(body.Fail, wireFail{ID: it.ID, Token: it.Token, Error: it.Error, NoRetry: it.NoRetry, RetryAfterMS: msec(it.RetryAfter)})
	}
	for i := range tx.Enqueue {
		w, err := tx.Enqueue[i].wire(ctx)
		if err != nil {
			return nil, fmt.Errorf("transact: enqueue[%d]: %w", i, err)
		}
		body.Enqueue = append(body.Enqueue, w)
	}
	var out TransactionResult
	if err := c.do(ctx, http.MethodPost, "/v1/transactions", nil, body, &out); err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	if len(out.Acked) != len(tx.Ack) || len(out.Failed) != len(tx.Fail) || len(out.Jobs) != len(tx.Enqueue) {
		return nil, fmt.Errorf("transact: server answered %d, %d and %d results for %d acks, %d fails and %d jobs",
			len(out.Acked), len(out.Failed), len(out.Jobs), len(tx.Ack), len(tx.Fail), len(tx.Enqueue))
	}
	return &out, nil
}
