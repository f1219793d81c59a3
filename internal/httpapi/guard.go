package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
)

type principalKey struct{}

type jobKey struct{}

// namespaced returns the caller when auth is on and its token is limited
// to namespaces, else nil: handlers check queues only when it is not nil.
// With auth off it costs one comparison.
func (a *API) namespaced(r *http.Request) *auth.Principal {
	if a.opts.Auth == nil {
		return nil
	}
	p, _ := r.Context().Value(principalKey{}).(*auth.Principal)
	return p
}

// checkedJob returns the job the auth check loaded for the route's {id},
// if it loaded one.
func (a *API) checkedJob(r *http.Request) *job.Job {
	if a.opts.Auth == nil {
		return nil
	}
	j, _ := r.Context().Value(jobKey{}).(*job.Job)
	return j
}

// guard wraps the handler of a route that requires perm. With auth off,
// and for public routes, it returns h itself, so that auth costs nothing
// when it is not used. Otherwise it answers 401 without a valid token and
// 403 when the token's role lacks perm. For a token limited to namespaces
// it also checks the queue named by the route's path: a {name} outside
// the namespaces is 403; a job {id} whose queue is outside them gets the
// very answer of a job that does not exist. Handlers check the queues
// named in bodies and queries themselves (see API.namespaced).
func (a *API) guard(perm auth.Permission, pattern string, h http.HandlerFunc) http.HandlerFunc {
	au := a.opts.Auth
	if au == nil || perm == auth.PermPublic {
		return h
	}
	byJob := strings.Contains(pattern, "{id}")
	byQueue := strings.Contains(pattern, "{name}")
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := au.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spool"`)
			a.writeError(w, r, err)
			return
		}
		if err := p.CheckPermission(perm, r.Method+" "+r.URL.Path); err != nil {
			a.writeError(w, r, err)
			return
		}
		if !p.Limited() {
			h(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		switch {
		case byQueue:
			if err := checkQueue(p, r.PathValue("name"), ""); err != nil {
				a.writeError(w, r, err)
				return
			}
		case byJob:
			j, err := a.jobInScope(r.Context(), p, r.PathValue("id"))
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			ctx = context.WithValue(ctx, jobKey{}, j)
		}
		h(w, r.WithContext(ctx))
	}
}

// jobInScope loads the job id for a principal limited to namespaces. A job
// in a queue outside them is reported exactly as a job that does not
// exist, so that a token learns nothing of other namespaces' jobs.
func (a *API) jobInScope(ctx context.Context, p *auth.Principal, id string) (*job.Job, error) {
	j, err := a.engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.AllowsQueue(j.Queue) {
		return nil, notFound(id)
	}
	return j, nil
}

// notFound is the error of a job that does not exist.
func notFound(id string) error {
	return fmt.Errorf("job %q: %w", id, job.ErrNotFound)
}

// scopeItems reports, for a principal limited to namespaces, which of ids
// name jobs it may touch: keep[i] is false for a job that does not exist
// or lies outside its namespaces. Each distinct id is looked up once.
func (a *API) scopeItems(ctx context.Context, p *auth.Principal, ids []string) (keep []bool, err error) {
	keep = make([]bool, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		ok, done := seen[id]
		if !done {
			j, err := a.engine.Get(ctx, id)
			switch {
			case err == nil:
				ok = p.AllowsQueue(j.Queue)
			case errors.Is(err, job.ErrNotFound):
				ok = false
			default:
				return nil, err
			}
			seen[id] = ok
		}
		keep[i] = ok
	}
	return keep, nil
}

// checkQueue answers forbidden, naming field, unless the principal may
// touch queueName; an empty name is the default queue.
func checkQueue(p *auth.Principal, queueName, field string) error {
	if queueName == "" {
		queueName = queue.DefaultQueue
	}
	return p.CheckQueue(queueName, field)
}
