package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// TransactRequest is one transaction as a client gave it: leased jobs to
// ack and to fail, and jobs to enqueue, applied together.
type TransactRequest struct {
	// Ack are the jobs to complete, each with its lease token.
	Ack []job.CompleteItem
	// Fail are the failed attempts, each with its lease token.
	Fail []job.FailItem
	// Enqueue are the jobs to add, as EnqueueBatch takes them.
	Enqueue []EnqueueRequest
	// NewQueues, when set, configures the queues the transaction creates
	// (see NewQueues): they are created in the transaction, or not at
	// all.
	NewQueues NewQueues
}

// TransactResult is what a transaction did, item by item in the order of
// its request.
type TransactResult struct {
	// Acked are the outcomes of the acks: each job's queue and the state it
	// ended in.
	Acked []job.Outcome
	// Failed are the outcomes of the failed attempts, with the run time of
	// a retrying job.
	Failed []job.Outcome
	// Jobs are the enqueued jobs, as EnqueueBatch answers them.
	Jobs []EnqueueResult
}

// Transact acks and fails leased jobs and enqueues new jobs atomically:
// all of it or, on any error, nothing (see store.Transactor).
//
// The request holds at least one item, and each of its lists at most
// MaxBatch (a *BatchTooLargeError naming the list beyond). Invalid input
// is a *job.InputError naming the field ("enqueue[2].kind",
// "fail[0].retry_after_ms"), as is a job named by two ack or fail items
// (naming the later one's id); the jobs to enqueue get their queues'
// defaults (durability, lease, maximum attempts, delay) and the engine's
// as EnqueueBatch gives them. Item ids are
// checked at the edge, as Ack's are. An item whose job does not exist, or
// whose token is not current, fails the call with a *job.ItemError naming
// its field; an enqueue of an id of another queue with a
// *job.IDTakenError naming "enqueue[i].id".
//
// Once the transaction commits, Transact wakes the fetches parked on the
// queues that got available jobs and on capped queues in which an ended
// lease freed a place, and the scheduler for the jobs that wait for their
// run time.
func (e *Engine) Transact(ctx context.Context, req TransactRequest) (*TransactResult, error) {
	if len(req.Ack)+len(req.Fail)+len(req.Enqueue) == 0 {
		return nil, job.Invalid("", "a transaction must hold at least one ack, fail or enqueue item")
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"ack", len(req.Ack)}, {"fail", len(req.Fail)}, {"enqueue", len(req.Enqueue)}} {
		if l.n > e.cfg.MaxBatch {
			return nil, &BatchTooLargeError{Field: l.field, Max: e.cfg.MaxBatch, Got: l.n}
		}
	}
	if err := e.checkAcks(req.Ack, listField("ack")); err != nil {
		return nil, err
	}
	if err := checkFails(req.Fail, listField("fail")); err != nil {
		return nil, err
	}
	if err := onePerJob(&req); err != nil {
		return nil, err
	}
	now := e.Now()
	jobs, create, err := e.prepareJobs(ctx, req.Enqueue, "enqueue", now, req.NewQueues)
	if err != nil {
		return nil, err
	}
	res, err := e.st.JobTransact(ctx, &store.JobTransactParams{
		Complete: req.Ack, Fail: req.Fail, Insert: jobs, Create: create, Now: now, Rand: e.rand,
	})
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	e.inserted(res.Inserted)
	e.emitOutcomes(res.Completed, now, func(i int) string { return req.Ack[i].ID }, nil)
	e.emitOutcomes(res.Failed, now, func(i int) string { return req.Fail[i].ID }, func(i int) string { return req.Fail[i].Message })
	e.emitInserted(res.Inserted, now)
	e.retrying(res.Failed)
	e.freed(slices.Concat(res.Completed, res.Failed))
	return &TransactResult{Acked: res.Completed, Failed: res.Failed, Jobs: enqueueResults(res.Inserted)}, nil
}

// onePerJob refuses a job named by two ack or fail items of req, naming
// the id of the later: a lease ends once.
func onePerJob(req *TransactRequest) error {
	first := make(map[string]string, len(req.Ack)+len(req.Fail))
	check := func(list string, i int, id string) error {
		field := fmt.Sprintf("%s[%d].id", list, i)
		if earlier, ok := first[id]; ok {
			return job.Invalid(field, "names the job that %s names already: a transaction acks or fails a job once", earlier)
		}
		first[id] = fmt.Sprintf("%s[%d]", list, i)
		return nil
	}
	for i := range req.Ack {
		if err := check("ack", i, req.Ack[i].ID); err != nil {
			return err
		}
	}
	for i := range req.Fail {
		if err := check("fail", i, req.Fail[i].ID); err != nil {
			return err
		}
	}
	return nil
}
