package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// AckResult is the outcome of acking one job.
type AckResult struct {
	// ID is the job's id.
	ID string `json:"id"`
	// State is completed, or cancelled when a user cancelled the job while
	// it ran.
	State State `json:"state"`
	// Err is this item's error in a batch (an *Error, such as lease_lost);
	// always nil from Ack.
	Err error `json:"-"`
}

// FailParams describes one failed attempt.
type FailParams struct {
	// Error is the reason, recorded in the job's Errors (at most 64 KiB).
	Error string
	// NoRetry makes the job dead at once, whatever attempts it has left.
	NoRetry bool
	// RetryAfter, when set, replaces the job's backoff for this retry.
	RetryAfter time.Duration
}

// FailResult is the outcome of failing one job.
type FailResult struct {
	// ID is the job's id.
	ID string `json:"id"`
	// State is retrying, dead (no attempts left, or NoRetry) or cancelled.
	State State `json:"state"`
	// RunAt is when a retrying job runs again.
	RunAt time.Time `json:"run_at"`
	// Err is this item's error in a batch; always nil from Fail.
	Err error `json:"-"`
}

// ExtendResult is the outcome of extending one lease (a heartbeat).
type ExtendResult struct {
	// ID is the job's id.
	ID string `json:"id"`
	// LeaseExpiresAt is the lease's new expiry.
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// CancelRequested tells the worker that a user cancelled the job: it
	// should stop and ack or fail it (the job then ends cancelled).
	CancelRequested bool `json:"cancel_requested"`
	// Err is this item's error in a batch; always nil from Extend.
	Err error `json:"-"`
}

// ReleaseResult is the outcome of releasing one job.
type ReleaseResult struct {
	// ID is the job's id.
	ID string `json:"id"`
	// State is available, or cancelled when a cancel was requested.
	State State `json:"state"`
	// Err is this item's error in a batch; always nil from Release.
	Err error `json:"-"`
}

// AckItem is one job of AckBatch.
type AckItem struct {
	// ID is the job's id.
	ID string
	// Token is the fencing token of the job's lease.
	Token int64
	// Result is stored with the job: a json.RawMessage as is, anything else
	// encoded with encoding/json; nil stores nothing.
	Result any
}

// FailItem is one job of FailBatch.
type FailItem struct {
	// ID is the job's id.
	ID string
	// Token is the fencing token of the job's lease.
	Token int64
	// Error is the reason, recorded in the job's Errors (at most 64 KiB).
	Error string
	// NoRetry makes the job dead at once, whatever attempts it has left.
	NoRetry bool
	// RetryAfter, when set, replaces the job's backoff for this retry.
	RetryAfter time.Duration
}

// ExtendItem is one lease of ExtendBatch.
type ExtendItem struct {
	// ID is the job's id.
	ID string
	// Token is the fencing token of the job's lease.
	Token int64
	// Lease is the lease's new length from now; zero means the job's own
	// lease duration.
	Lease time.Duration
}

// ReleaseItem is one job of ReleaseBatch.
type ReleaseItem struct {
	// ID is the job's id.
	ID string
	// Token is the fencing token of the job's lease.
	Token int64
}

type wireAck struct {
	ID     string          `json:"id,omitempty"`
	Token  int64           `json:"token"`
	Result json.RawMessage `json:"result,omitempty"`
}

type wireFail struct {
	ID           string `json:"id,omitempty"`
	Token        int64  `json:"token"`
	Error        string `json:"error"`
	NoRetry      bool   `json:"no_retry,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

type wireExtend struct {
	ID      string `json:"id,omitempty"`
	Token   int64  `json:"token"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
}

type wireRelease struct {
	ID    string `json:"id,omitempty"`
	Token int64  `json:"token"`
}

// Ack completes a job (POST /v1/jobs/{id}/ack) and stores result with it
// (see AckItem.Result). An oversized result gives ErrPayloadTooLarge and
// leaves the job active.
func (c *Client) Ack(ctx context.Context, id string, token int64, result any) (*AckResult, error) {
	raw, err := marshalValue(result)
	if err != nil {
		return nil, fmt.Errorf("ack job %s: encode result: %w", id, err)
	}
	var out AckResult
	if err := c.single(ctx, id, "/ack", wireAck{Token: token, Result: raw}, &out); err != nil {
		return nil, fmt.Errorf("ack job %s: %w", id, err)
	}
	return &out, nil
}

// Fail records a failed attempt (POST /v1/jobs/{id}/fail). The job retries
// after its backoff (or p.RetryAfter) while it has attempts left and
// p.NoRetry is false; otherwise it is dead.
func (c *Client) Fail(ctx context.Context, id string, token int64, p FailParams) (*FailResult, error) {
	var out FailResult
	body := wireFail{Token: token, Error: p.Error, NoRetry: p.NoRetry, RetryAfterMS: msec(p.RetryAfter)}
	if err := c.single(ctx, id, "/fail", body, &out); err != nil {
		return nil, fmt.Errorf("fail job %s: %w", id, err)
	}
	return &out, nil
}

// Extend moves a job's lease to lease from now (POST /v1/jobs/{id}/extend);
// zero means the job's own lease duration. Check CancelRequested in the
// result: a worker should stop a job a user cancelled.
func (c *Client) Extend(ctx context.Context, id string, token int64, lease time.Duration) (*ExtendResult, error) {
	var out ExtendResult
	if err := c.single(ctx, id, "/extend", wireExtend{Token: token, LeaseMS: msec(lease)}, &out); err != nil {
		return nil, fmt.Errorf("extend lease of job %s: %w", id, err)
	}
	return &out, nil
}

// Progress stores a progress report with an active job (POST
// /v1/jobs/{id}/progress), replacing the previous one. progress is encoded
// like AckItem.Result.
func (c *Client) Progress(ctx context.Context, id string, token int64, progress any) error {
	raw, err := marshalValue(progress)
	if err != nil {
		return fmt.Errorf("report progress of job %s: encode progress: %w", id, err)
	}
	body := struct {
		Token    int64           `json:"token"`
		Progress json.RawMessage `json:"progress"`
	}{Token: token, Progress: raw}
	if body.Progress == nil {
		body.Progress = json.RawMessage("null")
	}
	if err := c.single(ctx, id, "/progress", body, nil); err != nil {
		return fmt.Errorf("report progress of job %s: %w", id, err)
	}
	return nil
}

// Release hands a job back unrun (POST /v1/jobs/{id}/release): it is
// available again at once, and the hand-out does not count as an attempt.
// A job whose cancel was requested ends cancelled instead.
func (c *Client) Release(ctx context.Context, id string, token int64) (*ReleaseResult, error) {
	var out ReleaseResult
	if err := c.single(ctx, id, "/release", wireRelease{Token: token}, &out); err != nil {
		return nil, fmt.Errorf("release job %s: %w", id, err)
	}
	return &out, nil
}

// AckBatch acks many jobs in one call (POST /v1/jobs/ack); see "Leases" in
// the package documentation. Results come in the order of items.
func (c *Client) AckBatch(ctx context.Context, items []AckItem) ([]AckResult, error) {
	ws := make([]wireAck, len(items))
	for i, it := range items {
		raw, err := marshalValue(it.Result)
		if err != nil {
			return nil, fmt.Errorf("ack jobs: items[%d]: encode result: %w", i, err)
		}
		ws[i] = wireAck{ID: it.ID, Token: it.Token, Result: raw}
	}
	out := make([]AckResult, len(items))
	if err := c.batch(ctx, "/v1/jobs/ack", ws, len(items), func(i int, raw json.RawMessage) error {
		return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
	}); err != nil {
		return nil, fmt.Errorf("ack jobs: %w", err)
	}
	return out, nil
}

// FailBatch fails many jobs in one call (POST /v1/jobs/fail); see
// "Leases" in the package documentation. Results come in the order of items.
func (c *Client) FailBatch(ctx context.Context, items []FailItem) ([]FailResult, error) {
	ws := make([]wireFail, len(items))
	for i, it := range items {
		ws[i] = wireFail{ID: it.ID, Token: it.Token, Error: it.Error, NoRetry: it.NoRetry, RetryAfterMS: msec(it.RetryAfter)}
	}
	out := make([]FailResult, len(items))
	if err := c.batch(ctx, "/v1/jobs/fail", ws, len(items), func(i int, raw json.RawMessage) error {
		return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
	}); err != nil {
		return nil, fmt.Errorf("fail jobs: %w", err)
	}
	return out, nil
}

// ExtendBatch extends many leases in one call (POST /v1/jobs/extend): the
// heartbeat of a worker. See "Leases" in the package documentation;
// results come in the order of items.
func (c *Client) ExtendBatch(ctx context.Context, items []ExtendItem) ([]ExtendResult, error) {
	ws := make([]wireExtend, len(items))
	for i, it := range items {
		ws[i] = wireExtend{ID: it.ID, Token: it.Token, LeaseMS: msec(it.Lease)}
	}
	out := make([]ExtendResult, len(items))
	if err := c.batch(ctx, "/v1/jobs/extend", ws, len(items), func(i int, raw json.RawMessage) error {
		return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
	}); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	return out, nil
}

// ReleaseBatch releases many jobs in one call (POST /v1/jobs/release); see
// Release and "Leases" in the package documentation. Results come in the
// order of items.
func (c *Client) ReleaseBatch(ctx context.Context, items []ReleaseItem) ([]ReleaseResult, error) {
	ws := make([]wireRelease, len(items))
	for i, it := range items {
		ws[i] = wireRelease{ID: it.ID, Token: it.Token}
	}
	out := make([]ReleaseResult, len(items))
	if err := c.batch(ctx, "/v1/jobs/release", ws, len(items), func(i int, raw json.RawMessage) error {
		return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
	}); err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	return out, nil
}

// single posts body to one job's action route.
func (c *Client) single(ctx context.Context, id, action string, body, out any) error {
	if err := checkID(id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, jobPath(id, action), nil, body, out)
}

// batch posts {"items": items} to path and hands each of the n results to
// decode in order.
func (c *Client) batch(ctx context.Context, path string, items any, n int, decode func(i int, raw json.RawMessage) error) error {
	body := struct {
		Items any `json:"items"`
	}{Items: items}
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := c.do(ctx, http.MethodPost, path, nil, body, &out); err != nil {
		return err
	}
	if len(out.Results) != n {
		return fmt.Errorf("server answered %d results for %d items", len(out.Results), n)
	}
	for i, raw := range out.Results {
		if err := decode(i, raw); err != nil {
			return fmt.Errorf("decode results[%d]: %w", i, err)
		}
	}
	return nil
}

// decodeItem decodes one batch result into v, or, when it is an error
// item, stores its id in id and its *Error in errp.
func decodeItem(raw json.RawMessage, v any, id *string, errp *error) error {
	var head struct {
		ID    string     `json:"id"`
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	if head.Error != nil {
		*id = head.ID
		*errp = head.Error.itemError()
		return nil
	}
	return json.Unmarshal(raw, v)
}

// checkID refuses an empty job id locally, answering as the server does for
// a job that does not exist: an empty id would address another route.
func checkID(id string) error {
	if id == "" {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "empty job id"}
	}
	return nil
}

// checkQueue is checkID for queue names.
func checkQueue(name string) error {
	if name == "" {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "empty queue name"}
	}
	return nil
}
