package httpapi

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

// transactionBody is the body of POST /v1/transactions: the items of the
// batch ack and fail routes, and the jobs of the batch enqueue route.
type transactionBody struct {
	Ack     []ackItem         `json:"ack"`
	Fail    []failItem        `json:"fail"`
	Enqueue []wire.EnqueueJob `json:"enqueue"`
}

// transactionJSON answers a transaction: the answers of the batch ack,
// fail and enqueue routes, item by item.
type transactionJSON struct {
	Acked  []outcomeJSON       `json:"acked"`
	Failed []outcomeJSON       `json:"failed"`
	Jobs   []enqueueResultJSON `json:"jobs"`
}

// transactionQueues are the queues of a transaction's jobs to enqueue in
// order, for its route's scope.
func transactionQueues(in *transactionBody) []string {
	names := make([]string, len(in.Enqueue))
	for i := range in.Enqueue {
		names[i] = in.Enqueue[i].QueueName()
	}
	return names
}

// transactionLeases are the items of a transaction that name leased jobs,
// acks then fails, for its route's scope. It reads a body whose items
// transactRequest accepted, so each has its token.
func transactionLeases(in *transactionBody) []leaseRef {
	refs := make([]leaseRef, 0, len(in.Ack)+len(in.Fail))
	for i, it := range in.Ack {
		refs = append(refs, leaseRef{item: fmt.Sprintf("ack[%d]", i), id: it.ID, token: *it.Token})
	}
	for i, it := range in.Fail {
		refs = append(refs, leaseRef{item: fmt.Sprintf("fail[%d]", i), id: it.ID, token: *it.Token})
	}
	return refs
}

// transactRequest is the engine's form of a transaction body. It requires
// every ack and fail item to name a job id and a token; the engine checks
// the rest.
func transactRequest(in *transactionBody) (engine.TransactRequest, error) {
	req := engine.TransactRequest{
		Ack:     make([]job.CompleteItem, len(in.Ack)),
		Fail:    make([]job.FailItem, len(in.Fail)),
		Enqueue: make([]engine.EnqueueRequest, len(in.Enqueue)),
	}
	lease := func(item, id string, token *int64) (int64, error) {
		if !job.ValidJobID(id) {
			return 0, job.Invalid(item+".id", "must be a job id")
		}
		return checkToken(token, item+".token")
	}
	for i, it := range in.Ack {
		token, err := lease(fmt.Sprintf("ack[%d]", i), it.ID, it.Token)
		if err != nil {
			return req, err
		}
		req.Ack[i] = job.CompleteItem{ID: it.ID, Token: token, Result: it.Result}
	}
	for i, it := range in.Fail {
		token, err := lease(fmt.Sprintf("fail[%d]", i), it.ID, it.Token)
		if err != nil {
			return req, err
		}
		req.Fail[i] = job.FailItem{ID: it.ID, Token: token, Message: it.Error, NoRetry: it.NoRetry, RetryAfter: millis(it.RetryAfterMS)}
	}
	for i := range in.Enqueue {
		var err error
		req.Enqueue[i], err = enqueueRequest(&in.Enqueue[i], func(name string) string { return fmt.Sprintf("enqueue[%d].%s", i, name) })
		if err != nil {
			return req, err
		}
	}
	return req, nil
}

// transaction serves a transaction route with h: it decodes the body,
// checks the queues of its jobs to enqueue as the route's scope declares,
// reads its items, checks the jobs they name, and only then hands h the
// engine's request.
func transaction(h func(w http.ResponseWriter, r *http.Request, req engine.TransactRequest)) endpoint {
	return endpoint{kind: servesTransaction, in: reflect.TypeFor[transactionBody](), build: func(a *API, s *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var in transactionBody
			if !a.decodeChecked(w, r, s, &in) {
				return
			}
			req, err := transactRequest(&in)
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			if err := a.leasesInScope(r, s, &in); err != nil {
				a.writeError(w, r, err)
				return
			}
			h(w, r, req)
		}
	}}
}

func (a *API) transact(w http.ResponseWriter, r *http.Request, req engine.TransactRequest) {
	res, err := a.engine.Transact(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := transactionJSON{
		Acked:  make([]outcomeJSON, len(res.Acked)),
		Failed: make([]outcomeJSON, len(res.Failed)),
		Jobs:   make([]enqueueResultJSON, len(res.Jobs)),
	}
	for i, o := range res.Acked {
		out.Acked[i] = answerState(req.Ack[i].ID, o)
	}
	for i, o := range res.Failed {
		out.Failed[i] = answerFail(req.Fail[i].ID, o)
	}
	for i, x := range res.Jobs {
		out.Jobs[i] = enqueueResultJSON{ID: x.ID, State: x.State, Duplicate: x.Duplicate}
	}
	a.writeJSON(w, http.StatusOK, out)
}
