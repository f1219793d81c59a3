package queenapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// The refusals of one ack, in Queen's words.
const (
	refusedLease   = "Invalid or expired lease"
	refusedMissing = "Message not found"
)

// The statuses of an ack.
const (
	statusCompleted = "completed"
	statusSuccess   = "success"
	statusFailed    = "failed"
	statusDLQ       = "dlq"
	statusRetry     = "retry"
)

// defaultExtend is how far a lease extend without seconds moves the
// lease, as Queen's default.
const defaultExtend = 60 * time.Second

// ackJSON is one acknowledgment.
type ackJSON struct {
	TransactionID *string `json:"transactionId"`
	PartitionID   *string `json:"partitionId"`
	Status        *string `json:"status"`
	Error         *string `json:"error"`
	ConsumerGroup *string `json:"consumerGroup"`
	LeaseID       *string `json:"leaseId"`
}

// ackResultJSON is the answer for one acknowledgment.
type ackResultJSON struct {
	Index          int     `json:"index"`
	TransactionID  string  `json:"transactionId"`
	Success        bool    `json:"success"`
	Error          *string `json:"error"`
	QueueName      string  `json:"queueName,omitempty"`
	PartitionName  string  `json:"partitionName,omitempty"`
	LeaseReleased  bool    `json:"leaseReleased"`
	DLQ            bool    `json:"dlq"`
	ConsumerGroup  string  `json:"consumerGroup,omitempty"`
	LeaseExpiresAt *string `json:"leaseExpiresAt,omitempty"`
}

// target is the leased job an acknowledgment names.
type target struct {
	id        string
	token     int64
	queue     string
	partition string
	status    string
	message   string
	// refused, when set, is why the acknowledgment cannot apply.
	refused string
}

// resolve finds the job ack names, in the consumer group it names or
// defaultGroup. field names the acknowledgment in errors. Input the
// acknowledgment may not hold is an error; a job that is missing or not
// leased to its caller is a refusal (target.refused), as Queen answers
// it.
func (a *API) resolve(ctx context.Context, p *auth.Principal, ack *ackJSON, defaultGroup, field string) (target, error) {
	var t target
	if ack.TransactionID == nil || *ack.TransactionID == "" {
		return t, job.Invalid(field+"transactionId", "is required")
	}
	if ack.PartitionID == nil || *ack.PartitionID == "" {
		return t, job.Invalid(field+"partitionId", "is required to ensure message uniqueness")
	}
	name, partition, err := parsePartitionID(*ack.PartitionID)
	if err != nil {
		return t, job.Invalid(field+"partitionId", "%v", err)
	}
	if err := inScope(p, name, field+"partitionId"); err != nil {
		return t, err
	}
	t.queue, t.partition, t.status = name, partition, statusCompleted
	if ack.Status != nil && *ack.Status != "" {
		t.status = *ack.Status
	}
	switch t.status {
	case statusCompleted, statusSuccess, statusFailed, statusDLQ, statusRetry:
	default:
		return t, job.Invalid(field+"status", "must be completed, success, failed, dlq or retry")
	}
	if ack.Error != nil {
		t.message = *ack.Error
	}
	group := defaultGroup
	if ack.ConsumerGroup != nil && *ack.ConsumerGroup != "" {
		group = *ack.ConsumerGroup
	}
	lane, copyOf := name, func(id string) string { return id }
	if group != "" && group != QueueMode {
		if !job.ValidName(group) {
			return t, job.Invalid(field+"consumerGroup", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
		}
		lane, copyOf = job.LaneName(name, group), func(id string) string { return job.CopyID(id, group) }
	}
	txID := *ack.TransactionID
	// A message pushed through this API has the id its queue, partition
	// and transactionId make; one enqueued through Spool's own API has
	// its id as its transactionId.
	candidates := []string{copyOf(messageID(name, partition, txID))}
	if job.ValidName(txID) {
		candidates = append(candidates, copyOf(txID))
	}
	if ack.LeaseID != nil && *ack.LeaseID != "" {
		id, token, ok := parseLeaseID(*ack.LeaseID)
		if !ok || (id != candidates[0] && (len(candidates) < 2 || id != candidates[1])) {
			t.refused = refusedLease
			return t, nil
		}
		t.id, t.token = id, token
		if p == nil || !p.Limited() {
			return t, nil
		}
		// A token limited to namespaces acks only jobs in them: the job's
		// queue must be the lane its partitionId names.
		j, err := a.engine.Get(ctx, id)
		switch {
		case errors.Is(err, job.ErrNotFound) || (err == nil && j.Queue != lane):
			t.refused = refusedMissing
		case err != nil:
			return t, err
		}
		return t, nil
	}
	// No lease named: the job's current one, as Queen acks a message
	// without a lease.
	for _, id := range candidates {
		j, err := a.engine.Get(ctx, id)
		if errors.Is(err, job.ErrNotFound) {
			continue
		}
		if err != nil {
			return t, err
		}
		if j.Queue != lane {
			continue
		}
		if j.State != job.StateActive {
			t.refused = refusedLease
			return t, nil
		}
		t.id, t.token = j.ID, j.LeaseToken
		return t, nil
	}
	t.refused = refusedMissing
	return t, nil
}

// apply applies the acknowledgments of targets, each by its status, and
// answers each in order.
func (a *API) apply(ctx context.Context, targets []target, group string) ([]ackResultJSON, error) {
	out := make([]ackResultJSON, len(targets))
	var complete []job.CompleteItem
	var fail []job.FailItem
	var release []job.ReleaseItem
	var completeAt, failAt, releaseAt []int
	for i, t := range targets {
		out[i] = ackResultJSON{Index: i, QueueName: t.queue, PartitionName: t.partition, ConsumerGroup: group}
		if t.refused != "" {
			out[i].Error = &targets[i].refused
			continue
		}
		switch t.status {
		case statusCompleted, statusSuccess:
			complete = append(complete, job.CompleteItem{ID: t.id, Token: t.token})
			completeAt = append(completeAt, i)
		case statusFailed, statusDLQ:
			msg := t.message
			if msg == "" {
				msg = "failed"
			}
			// Queen delivers a failed message again at once, until its
			// retries are used up; dlq sends it to the dead letters now.
			fail = append(fail, job.FailItem{ID: t.id, Token: t.token, Message: msg, NoRetry: t.status == statusDLQ, RetryAfter: time.Millisecond})
			failAt = append(failAt, i)
		case statusRetry:
			release = append(release, job.ReleaseItem{ID: t.id, Token: t.token})
			releaseAt = append(releaseAt, i)
		}
	}
	for _, step := range []struct {
		n   int
		at  []int
		run func() ([]job.Outcome, error)
	}{
		{len(complete), completeAt, func() ([]job.Outcome, error) { return a.engine.Ack(ctx, complete) }},
		{len(fail), failAt, func() ([]job.Outcome, error) { return a.engine.Fail(ctx, fail) }},
		{len(release), releaseAt, func() ([]job.Outcome, error) { return a.engine.Release(ctx, release) }},
	} {
		if step.n == 0 {
			continue
		}
		outcomes, err := step.run()
		if err != nil {
			return nil, err
		}
		for k, o := range outcomes {
			r := &out[step.at[k]]
			switch {
			case errors.Is(o.Err, job.ErrNotFound):
				msg := refusedMissing
				r.Error = &msg
			case o.Err != nil:
				msg := refusedLease
				r.Error = &msg
			default:
				r.Success, r.LeaseReleased, r.DLQ = true, true, o.State == job.StateDead
			}
		}
	}
	return out, nil
}

// ack applies one acknowledgment and answers it as a list of one.
func (a *API) ack(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in ackJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.resolve(r.Context(), p, &in, "", "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out, err := a.apply(r.Context(), []target{t}, stringOr(in.ConsumerGroup, QueueMode))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out[0].TransactionID = *in.TransactionID
	a.writeJSON(w, http.StatusOK, out)
}

type ackBatchBody struct {
	Acknowledgments *[]ackJSON `json:"acknowledgments"`
	ConsumerGroup   *string    `json:"consumerGroup"`
}

// ackBatch applies acknowledgments item by item and answers each in
// order; one refused does not stop the others.
func (a *API) ackBatch(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in ackBatchBody
	if err := a.decode(w, r, &in, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.Acknowledgments == nil {
		a.fail(w, r, job.Invalid("acknowledgments", "an acknowledgments array is required"))
		return
	}
	acks := *in.Acknowledgments
	if limit := a.engine.MaxBatch(); len(acks) > limit {
		a.fail(w, r, &engine.BatchTooLargeError{Field: "acknowledgments", Max: limit, Got: len(acks)})
		return
	}
	group := stringOr(in.ConsumerGroup, "")
	targets := make([]target, len(acks))
	for i := range acks {
		t, err := a.resolve(r.Context(), p, &acks[i], group, fmt.Sprintf("acknowledgments[%d].", i))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		targets[i] = t
	}
	if group == "" {
		group = QueueMode
	}
	out, err := a.apply(r.Context(), targets, group)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for i := range out {
		out[i].TransactionID = *acks[i].TransactionID
	}
	a.writeJSON(w, http.StatusOK, out)
}

type extendBody struct {
	Seconds *float64 `json:"seconds"`
}

type extendJSON struct {
	LeaseID      string  `json:"leaseId"`
	Success      bool    `json:"success"`
	Renewed      int     `json:"renewed"`
	NewExpiresAt *string `json:"newExpiresAt"`
	ExpiresAt    *string `json:"expiresAt"`
	Error        *string `json:"error,omitempty"`
}

// extend moves a lease's expiry seconds (60 unless the body says) from
// now. A lease that is gone answers success false.
func (a *API) extend(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	var in extendBody
	if err := a.decode(w, r, &in, true); err != nil {
		a.fail(w, r, err)
		return
	}
	lease := defaultExtend
	if in.Seconds != nil {
		d, err := seconds(in.Seconds, defaultExtend, "seconds")
		if err != nil {
			a.fail(w, r, err)
			return
		}
		lease = d
	}
	if lease < engine.MinLease || lease > engine.MaxLease {
		a.fail(w, r, job.Invalid("seconds", "must be between %v and %v", engine.MinLease.Seconds(), engine.MaxLease.Seconds()))
		return
	}
	leaseName := r.PathValue("lease")
	out := extendJSON{LeaseID: leaseName}
	gone := func() {
		msg := refusedLease
		out.Error = &msg
		a.writeJSON(w, http.StatusOK, []extendJSON{out})
	}
	id, token, ok := parseLeaseID(leaseName)
	if !ok {
		gone()
		return
	}
	if p != nil && p.Limited() {
		j, err := a.engine.Get(r.Context(), id)
		if errors.Is(err, job.ErrNotFound) || (err == nil && inScope(p, j.Queue, "leaseId") != nil) {
			gone()
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
	}
	outcomes, err := a.engine.Extend(r.Context(), []job.ExtendItem{{ID: id, Token: token, Lease: lease}})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if outcomes[0].Err != nil {
		gone()
		return
	}
	at := queenTime(outcomes[0].LeaseExpiresAt)
	out.Success, out.Renewed, out.NewExpiresAt, out.ExpiresAt = true, 1, &at, &at
	a.writeJSON(w, http.StatusOK, []extendJSON{out})
}
