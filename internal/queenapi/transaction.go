package queenapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
	"github.com/spoolq/spool/internal/store"
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

// transaction applies acks and pushes atomically, as Spool's own
// transactions do: all of them or, when an ack's lease is gone or its
// message missing, none (answered success false, as Queen does). An ack
// of status failed or dlq sends its message to the dead letters.
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
	ctx := r.Context()
	var req queue.TransactRequest
	var results []transactionResultJSON
	refuse := func(reason string) {
		a.writeJSON(w, http.StatusOK, transactionJSON{Success: false, TransactionID: newUUID(),
			Error: "ACK operation failed: " + reason, Results: results})
	}
	for i, op := range *in.Operations {
		field := fmt.Sprintf("operations[%d].", i)
		switch op.Type {
		case "push":
			reqs, err := a.messages(ctx, p, op.Items, field+"items")
			if err != nil {
				a.fail(w, r, err)
				return
			}
			for k := range reqs {
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
			if t.refused != "" {
				refuse(t.refused)
				return
			}
			res := transactionResultJSON{Index: len(results), Type: "ack", Success: true, TransactionID: *op.TransactionID, Status: t.status}
			switch t.status {
			case statusCompleted, statusSuccess:
				req.Ack = append(req.Ack, store.JobCompleteItem{ID: t.id, Token: t.token})
			case statusFailed, statusDLQ:
				msg := t.message
				if msg == "" {
					msg = "failed"
				}
				req.Fail = append(req.Fail, store.JobFailItem{ID: t.id, Token: t.token, Message: msg, NoRetry: true})
				res.DLQ = true
			default:
				a.fail(w, r, job.Invalid(field+"status", "must be completed, success, failed or dlq in a transaction"))
				return
			}
			results = append(results, res)
		default:
			a.fail(w, r, job.Invalid(field+"type", "must be push or ack"))
			return
		}
	}
	if _, err := a.engine.Transact(ctx, req); err != nil {
		var item *job.ItemError
		if errors.As(err, &item) {
			reason := refusedLease
			if errors.Is(err, job.ErrNotFound) {
				reason = refusedMissing
			}
			refuse(reason)
			return
		}
		a.fail(w, r, job.RenameItems(err, "enqueue", "items"))
		return
	}
	a.writeJSON(w, http.StatusOK, transactionJSON{Success: true, TransactionID: newUUID(), Results: results})
}
