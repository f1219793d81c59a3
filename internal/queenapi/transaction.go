package queenapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// operationJSON is one operation of a transaction: an ack (the fields of
// an acknowledgment) or a push (items).
type operationJSON struct {
	Type string `json:"type"`
	ackJSON
	Items []pushItem `json:"items"`
}

type transactionBody struct {
	Operations *[]operationJSON `json:"operations"`
	// RequiredLeases are the leases of the acks, which each ack checks
	// with its own lease.
	RequiredLeases []string `json:"requiredLeases"`
}

// transactionResultJSON is the answer for one operation of a transaction:
// one per pushed message and one per ack, in the order given.
type transactionResultJSON struct {
	Index         int     `json:"index"`
	Type          string  `json:"type"`
	Success       bool    `json:"success"`
	TransactionID string  `json:"transactionId"`
	MessageID     string  `json:"messageId,omitempty"`
	PartitionID   string  `json:"partitionId,omitempty"`
	QueueName     string  `json:"queueName,omitempty"`
	Status        string  `json:"status,omitempty"`
	Error         *string `json:"error"`
	DLQ           bool    `json:"dlq"`
}

type transactionJSON struct {
	Success       bool                    `json:"success"`
	TransactionID string                  `json:"transactionId"`
	Error         string                  `json:"error,omitempty"`
	Results       []transactionResultJSON `json:"results"`
}

// notApplied is the error of an operation of a refused transaction that
// was not refused itself.
const notApplied = "not applied: the transaction was refused"

// transaction applies acks and pushes atomically, as Spool's own
// transactions do: all of them or, when an ack's lease is gone or its
// message missing, none (answered success false, as Queen does, with no
// operation marked a success). Every operation is checked before
// anything is written; the queues its pushes create are created in the
// transaction (see newQueues). An ack of status failed or dlq sends its
// message to the dead letters.
func (a *API) transaction(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in transactionBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.Operations == nil || len(*in.Operations) == 0 {
		a.fail(w, r, job.Invalid("operations", "a non-empty operations array is required"))
		return
	}
	ops := *in.Operations
	if limit := a.engine.MaxBatch(); len(ops) > limit {
		a.fail(w, r, &engine.BatchTooLargeError{Field: "operations", Max: limit, Got: len(ops)})
		return
	}
	ctx := r.Context()
	var req engine.TransactRequest
	var results []transactionResultJSON
	// ackAt and failAt are the results of the acks and fails of req.
	var ackAt, failAt []int
	// itemFields name the items of req.Enqueue in the request.
	var itemFields []string
	refusal := ""
	for i, op := range ops {
		field := fmt.Sprintf("operations[%d].", i)
		switch op.Type {
		case "push":
			reqs, err := messages(p, op.Items, field+"items")
			if err != nil {
				a.fail(w, r, err)
				return
			}
			for k := range reqs {
				itemFields = append(itemFields, fmt.Sprintf("%sitems[%d]", field, k))
				results = append(results, transactionResultJSON{Index: len(results), Type: "push", Success: true,
					TransactionID: txIDOfRequest(&reqs[k]), MessageID: reqs[k].ID,
					PartitionID: partitionID(reqs[k].Queue, reqs[k].Group), QueueName: reqs[k].Queue})
			}
			req.Enqueue = append(req.Enqueue, reqs...)
		case "ack":
			t, err := a.resolve(ctx, p, &op.ackJSON, "", field)
			if err != nil {
				a.fail(w, r, err)
				return
			}
			res := transactionResultJSON{Index: len(results), Type: "ack", Success: true, TransactionID: *op.TransactionID, Status: t.status}
			switch t.status {
			case statusCompleted, statusSuccess, statusFailed, statusDLQ:
			default:
				a.fail(w, r, job.Invalid(field+"status", "must be completed, success, failed or dlq in a transaction"))
				return
			}
			switch {
			case t.refused != "":
				res.Success, res.Error = false, &t.refused
				refusal = cmp.Or(refusal, t.refused)
			case t.status == statusCompleted || t.status == statusSuccess:
				req.Ack = append(req.Ack, job.CompleteItem{ID: t.id, Token: t.token})
				ackAt = append(ackAt, len(results))
			default:
				msg := cmp.Or(t.message, "failed")
				req.Fail = append(req.Fail, job.FailItem{ID: t.id, Token: t.token, Message: msg, NoRetry: true})
				failAt = append(failAt, len(results))
				res.DLQ = true
			}
			results = append(results, res)
		default:
			a.fail(w, r, job.Invalid(field+"type", "must be push or ack"))
			return
		}
	}
	refuse := func(reason string) {
		for i := range results {
			if results[i].Success {
				results[i].Success, results[i].DLQ = false, false
				msg := notApplied
				results[i].Error = &msg
			}
		}
		a.writeJSON(w, http.StatusOK, transactionJSON{Success: false, TransactionID: newUUID(),
			Error: "ACK operation failed: " + reason, Results: results})
	}
	if limit := a.engine.MaxBatch(); len(req.Enqueue) > limit {
		a.fail(w, r, &engine.BatchTooLargeError{Field: "operations", Max: limit, Got: len(req.Enqueue)})
		return
	}
	if refusal != "" {
		refuse(refusal)
		return
	}
	itemField := func(i int) string { return itemFields[i] }
	req.NewQueues = newQueues(p, firstItemOf(req.Enqueue, itemField))
	if _, err := a.engine.Transact(ctx, req); err != nil {
		var refused *job.ItemError
		if errors.As(err, &refused) {
			reason := refusedLease
			if errors.Is(err, job.ErrNotFound) {
				reason = refusedMissing
			}
			if at := refusedResult(refused.Field, ackAt, failAt); at >= 0 {
				results[at].Success, results[at].DLQ, results[at].Error = false, false, &reason
			}
			refuse(reason)
			return
		}
		a.fail(w, r, renameItems(err, "enqueue", itemField))
		return
	}
	a.writeJSON(w, http.StatusOK, transactionJSON{Success: true, TransactionID: newUUID(), Results: results})
}

// refusedResult is the result of the ack or fail item that field
// ("ack[2].token", "fail[0].id") names, by the positions of the acks
// (ackAt) and fails (failAt); -1 when it names none.
func refusedResult(field string, ackAt, failAt []int) int {
	list, rest, ok := strings.Cut(field, "[")
	if !ok {
		return -1
	}
	digits, _, ok := strings.Cut(rest, "]")
	k, err := strconv.Atoi(digits)
	if !ok || err != nil || k < 0 {
		return -1
	}
	switch {
	case list == "ack" && k < len(ackAt):
		return ackAt[k]
	case list == "fail" && k < len(failAt):
		return failAt[k]
	}
	return -1
}
