package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
)

// The items of the calls a lease holder makes. A single-job route takes one
// as its body with the id in the path (an id in the body must match it); a
// batch route takes {"items": [...]}.
type (
	ackItem struct {
		ID     string          `json:"id"`
		Token  *int64          `json:"token"`
		Result json.RawMessage `json:"result"`
	}
	failItem struct {
		ID           string `json:"id"`
		Token        *int64 `json:"token"`
		Error        string `json:"error"`
		NoRetry      bool   `json:"no_retry"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	}
	extendItem struct {
		ID      string `json:"id"`
		Token   *int64 `json:"token"`
		LeaseMS *int64 `json:"lease_ms"`
	}
	releaseItem struct {
		ID    string `json:"id"`
		Token *int64 `json:"token"`
	}
	progressBody struct {
		Token    *int64          `json:"token"`
		Progress json.RawMessage `json:"progress"`
	}
)

// leaseItem is what the shared handlers need of an item.
type leaseItem interface {
	ackItem | failItem | extendItem | releaseItem
}

// leaseOp applies items whose ids and tokens are checked; answer renders a
// successful outcome. check, when set, validates the rest of an item
// before anything is applied; field names a wire field in its errors.
type leaseOp[T leaseItem] struct {
	apply  func(ctx context.Context, items []T, tokens []int64) ([]job.Outcome, error)
	answer func(id string, o job.Outcome) outcomeJSON
	check  func(it *T, field func(string) string) error
}

// outcomeJSON answers one item: the single route's answer, or the item's
// error in a batch.
type outcomeJSON struct {
	ID              string     `json:"id"`
	State           job.State  `json:"state,omitempty"`
	RunAt           *time.Time `json:"run_at,omitempty"`
	LeaseExpiresAt  *time.Time `json:"lease_expires_at,omitempty"`
	CancelRequested *bool      `json:"cancel_requested,omitempty"`
	Error           *apiError  `json:"error,omitempty"`
}

type resultsJSON struct {
	Results []outcomeJSON `json:"results"`
}

// idAndToken returns pointers to the id and token of an item.
func idAndToken[T leaseItem](it *T) (*string, *int64) {
	switch v := any(it).(type) {
	case *ackItem:
		return &v.ID, v.Token
	case *failItem:
		return &v.ID, v.Token
	case *extendItem:
		return &v.ID, v.Token
	case *releaseItem:
		return &v.ID, v.Token
	}
	panic("httpapi: unknown lease item type")
}

// checkToken requires a fencing token; field names it in the request.
func checkToken(token *int64, field string) (int64, error) {
	if token == nil {
		return 0, job.Invalid(field, "is required: the lease token from the fetch")
	}
	if *token < 1 {
		return 0, job.Invalid(field, "must be a lease token from a fetch (1 or more)")
	}
	return *token, nil
}

// leaseOne is the handler of a single-job route: it runs op for the job
// named by the path, with the item decoded from the body.
func leaseOne[T leaseItem](a *API, op leaseOp[T]) func(w http.ResponseWriter, r *http.Request, it *T) {
	return func(w http.ResponseWriter, r *http.Request, it *T) { serveOne(a, w, r, op, it) }
}

// serveOne runs op for the job named by the path.
func serveOne[T leaseItem](a *API, w http.ResponseWriter, r *http.Request, op leaseOp[T], it *T) {
	path := r.PathValue("id")
	id, tokenPtr := idAndToken(it)
	if *id != "" && *id != path {
		a.writeError(w, r, job.Invalid("id", "must match the job id in the path, or be left out"))
		return
	}
	*id = path
	if !job.ValidJobID(path) {
		a.writeError(w, r, fmt.Errorf("job %q: %w", path, job.ErrNotFound))
		return
	}
	token, err := checkToken(tokenPtr, "token")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if op.check != nil {
		if err := op.check(it, fieldName); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	out, err := op.apply(r.Context(), []T{*it}, []int64{token})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out[0].Err != nil {
		a.writeError(w, r, out[0].Err)
		return
	}
	a.writeJSON(w, http.StatusOK, op.answer(path, out[0]))
}

// itemsBody is the body of a batch route.
type itemsBody[T leaseItem] struct {
	Items []T `json:"items"`
}

// itemIDs are the job ids of a batch's items in order, for its route's
// scope.
func itemIDs[T leaseItem](in *itemsBody[T]) []string {
	ids := make([]string, len(in.Items))
	for i := range in.Items {
		id, _ := idAndToken(&in.Items[i])
		ids[i] = *id
	}
	return ids
}

// leaseBatch serves a batch route: it decodes {"items": [...]}, checks
// every item, leaves out of op the items the route's scope keeps from the
// caller (answering each as a missing job), and runs op for the others.
func leaseBatch[T leaseItem](op leaseOp[T]) endpoint {
	return endpoint{kind: servesItems, in: reflect.TypeFor[itemsBody[T]](), build: func(a *API, s *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var in itemsBody[T]
			if err := a.decode(w, r, &in, false); err != nil {
				a.writeError(w, r, err)
				return
			}
			serveBatch(a, w, r, op, s, &in)
		}
	}}
}

// serveBatch runs op for every item of in that s keeps in scope.
func serveBatch[T leaseItem](a *API, w http.ResponseWriter, r *http.Request, op leaseOp[T], s *scope, in *itemsBody[T]) {
	if len(in.Items) == 0 {
		a.writeError(w, r, job.Invalid("items", "must hold at least one item"))
		return
	}
	tokens := make([]int64, len(in.Items))
	for i := range in.Items {
		id, tokenPtr := idAndToken(&in.Items[i])
		if !job.ValidJobID(*id) {
			a.writeError(w, r, job.Invalid(fmt.Sprintf("items[%d].id", i), "must be a job id"))
			return
		}
		token, err := checkToken(tokenPtr, fmt.Sprintf("items[%d].token", i))
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		tokens[i] = token
		if op.check != nil {
			if err := op.check(&in.Items[i], func(name string) string { return fmt.Sprintf("items[%d].%s", i, name) }); err != nil {
				a.writeError(w, r, err)
				return
			}
		}
	}
	keep, err := a.itemsInScope(r, s, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := applyKept(r.Context(), op, in.Items, tokens, keep)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res := resultsJSON{Results: make([]outcomeJSON, len(out))}
	for i, o := range out {
		id, _ := idAndToken(&in.Items[i])
		if o.Err != nil {
			e, _ := classify(o.Err)
			res.Results[i] = outcomeJSON{ID: *id, Error: e}
			continue
		}
		res.Results[i] = op.answer(*id, o)
	}
	a.writeJSON(w, http.StatusOK, res)
}

// applyKept runs op for the items keep keeps (all of them when keep is
// nil). An item left out is not applied and gets the not_found error a
// missing job gets.
func applyKept[T leaseItem](ctx context.Context, op leaseOp[T], items []T, tokens []int64, keep []bool) ([]job.Outcome, error) {
	if keep == nil {
		return op.apply(ctx, items, tokens)
	}
	var kept []T
	var keptTokens []int64
	for i, ok := range keep {
		if ok {
			kept = append(kept, items[i])
			keptTokens = append(keptTokens, tokens[i])
		}
	}
	var applied []job.Outcome
	if len(kept) > 0 {
		var err error
		if applied, err = op.apply(ctx, kept, keptTokens); err != nil {
			return nil, err
		}
	}
	out := make([]job.Outcome, len(items))
	for i, ok := range keep {
		if !ok {
			id, _ := idAndToken(&items[i])
			out[i] = job.Outcome{Err: notFound(*id)}
			continue
		}
		out[i], applied = applied[0], applied[1:]
	}
	return out, nil
}

func answerState(id string, o job.Outcome) outcomeJSON {
	return outcomeJSON{ID: id, State: o.State}
}

func answerFail(id string, o job.Outcome) outcomeJSON {
	return outcomeJSON{ID: id, State: o.State, RunAt: timeOrNil(o.RunAt)}
}

func answerExtend(id string, o job.Outcome) outcomeJSON {
	cancel := o.CancelRequested
	return outcomeJSON{ID: id, LeaseExpiresAt: timeOrNil(o.LeaseExpiresAt), CancelRequested: &cancel}
}

func (a *API) ackOp() leaseOp[ackItem] {
	return leaseOp[ackItem]{answer: answerState, apply: func(ctx context.Context, its []ackItem, tokens []int64) ([]job.Outcome, error) {
		items := make([]job.CompleteItem, len(its))
		for i, it := range its {
			items[i] = job.CompleteItem{ID: it.ID, Token: tokens[i], Result: it.Result}
		}
		return a.engine.Ack(ctx, items)
	}}
}

func (a *API) failOp() leaseOp[failItem] {
	return leaseOp[failItem]{answer: answerFail, apply: func(ctx context.Context, its []failItem, tokens []int64) ([]job.Outcome, error) {
		items := make([]job.FailItem, len(its))
		for i, it := range its {
			items[i] = job.FailItem{ID: it.ID, Token: tokens[i], Message: it.Error, NoRetry: it.NoRetry, RetryAfter: millis(it.RetryAfterMS)}
		}
		return a.engine.Fail(ctx, items)
	}}
}

func (a *API) extendOp() leaseOp[extendItem] {
	return leaseOp[extendItem]{answer: answerExtend, apply: func(ctx context.Context, its []extendItem, tokens []int64) ([]job.Outcome, error) {
		items := make([]job.ExtendItem, len(its))
		for i, it := range its {
			var leaseMS int64
			if it.LeaseMS != nil {
				leaseMS = *it.LeaseMS
			}
			items[i] = job.ExtendItem{ID: it.ID, Token: tokens[i], Lease: millis(leaseMS)}
		}
		return a.engine.Extend(ctx, items)
	}, check: func(it *extendItem, field func(string) string) error {
		var leaseMS int64
		return optional(it.LeaseMS, &leaseMS, field, "lease_ms", leaseRule, engine.MinLease.Milliseconds(), engine.MaxLease.Milliseconds())
	}}
}

func (a *API) releaseOp() leaseOp[releaseItem] {
	return leaseOp[releaseItem]{answer: answerState, apply: func(ctx context.Context, its []releaseItem, tokens []int64) ([]job.Outcome, error) {
		items := make([]job.ReleaseItem, len(its))
		for i, it := range its {
			items[i] = job.ReleaseItem{ID: it.ID, Token: tokens[i]}
		}
		return a.engine.Release(ctx, items)
	}}
}

func (a *API) progress(w http.ResponseWriter, r *http.Request, body *progressBody) {
	id := r.PathValue("id")
	token, err := checkToken(body.Token, "token")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if !job.ValidJobID(id) {
		a.writeError(w, r, job.Invalid("id", "must be a job id"))
		return
	}
	if err := a.engine.Progress(r.Context(), id, token, body.Progress); err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, outcomeJSON{ID: id})
}
