package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
)

// Auth checks the bearer tokens of requests. It keeps SHA-256 hashes of
// the secrets, never the secrets, and compares a presented secret's hash
// with every known hash in constant time. It is safe for concurrent use.
type Auth struct {
	entries []authEntry
}

type authEntry struct {
	hash [sha256.Size]byte
	p    *principal
}

// principal is the caller a valid token stands for.
type principal struct {
	name       string
	role       Role
	namespaces []string
}

// NewAuth returns an Auth accepting tokens. It fails when tokens is empty,
// when a token is malformed, or when two tokens share a name or a secret.
func NewAuth(tokens []Token) (*Auth, error) {
	if len(tokens) == 0 {
		return nil, errors.New("no tokens")
	}
	au := &Auth{}
	names := make(map[string]bool, len(tokens))
	hashes := make(map[[sha256.Size]byte]string, len(tokens))
	for _, t := range tokens {
		if !job.ValidName(t.Name) {
			return nil, fmt.Errorf("token name %q is not a name", t.Name)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("token %s is listed twice", t.Name)
		}
		names[t.Name] = true
		if !t.Role.valid() {
			return nil, fmt.Errorf("token %s: role %q is not admin, producer, worker or read-only", t.Name, t.Role)
		}
		if err := checkSecret(t.Secret); err != nil {
			return nil, fmt.Errorf("token %s: %w", t.Name, err)
		}
		sum := sha256.Sum256([]byte(t.Secret))
		if other, dup := hashes[sum]; dup {
			return nil, fmt.Errorf("tokens %s and %s have the same secret", other, t.Name)
		}
		hashes[sum] = t.Name
		for _, ns := range t.Namespaces {
			if !job.ValidName(ns) {
				return nil, fmt.Errorf("token %s: namespace %q is not a queue name prefix", t.Name, ns)
			}
		}
		p := &principal{name: t.Name, role: t.Role, namespaces: append([]string(nil), t.Namespaces...)}
		au.entries = append(au.entries, authEntry{hash: sum, p: p})
	}
	return au, nil
}

// LoadAuth is NewAuth of LoadTokens(path, env).
func LoadAuth(path, env string) (*Auth, error) {
	tokens, err := LoadTokens(path, env)
	if err != nil {
		return nil, err
	}
	return NewAuth(tokens)
}

// Summary describes the tokens for a start-up log line: names, roles and
// namespaces, no secrets.
func (au *Auth) Summary() []string {
	out := make([]string, len(au.entries))
	for i, e := range au.entries {
		ns := "*"
		if len(e.p.namespaces) > 0 {
			ns = strings.Join(e.p.namespaces, ",")
		}
		out[i] = e.p.name + " " + string(e.p.role) + " " + ns
	}
	return out
}

// authenticate returns the principal of an Authorization header, or an
// unauthorized error. Every known hash is compared, so the time taken does
// not tell which token came close.
func (au *Auth) authenticate(header string) (*principal, *apiError) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return nil, newError(CodeUnauthorized, "", "this call needs an Authorization: Bearer token")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(header[len(scheme):])))
	var found *principal
	for i := range au.entries {
		if subtle.ConstantTimeCompare(sum[:], au.entries[i].hash[:]) == 1 {
			found = au.entries[i].p
		}
	}
	if found == nil {
		return nil, newError(CodeUnauthorized, "", "the bearer token is not valid")
	}
	return found, nil
}

// allowsQueue reports whether the principal may touch the queue name.
func (p *principal) allowsQueue(name string) bool {
	if len(p.namespaces) == 0 {
		return true
	}
	for _, ns := range p.namespaces {
		if strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}

// checkQueue answers forbidden, naming field, unless the principal may
// touch queue; an empty queue is the default queue.
func (p *principal) checkQueue(queueName, field string) error {
	if queueName == "" {
		queueName = queue.DefaultQueue
	}
	if p.allowsQueue(queueName) {
		return nil
	}
	return newError(CodeForbidden, field, "%sthis token may not use queue %q", fieldPrefix(field), queueName)
}

func fieldPrefix(field string) string {
	if field == "" {
		return ""
	}
	return field + ": "
}

type principalKey struct{}

type jobKey struct{}

// namespaced returns the caller when auth is on and its token is limited
// to namespaces, else nil: handlers check queues only when it is not nil.
// With auth off it costs one comparison.
func (a *API) namespaced(r *http.Request) *principal {
	if a.opts.Auth == nil {
		return nil
	}
	p, _ := r.Context().Value(principalKey{}).(*principal)
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
func (a *API) guard(perm Permission, pattern string, h http.HandlerFunc) http.HandlerFunc {
	au := a.opts.Auth
	if au == nil || perm == PermPublic {
		return h
	}
	byJob := strings.Contains(pattern, "{id}")
	byQueue := strings.Contains(pattern, "{name}")
	return func(w http.ResponseWriter, r *http.Request) {
		p, aerr := au.authenticate(r.Header.Get("Authorization"))
		if aerr != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spool"`)
			a.writeError(w, r, aerr)
			return
		}
		if !p.role.Allows(perm) {
			a.writeError(w, r, newError(CodeForbidden, "", "a %s token may not call %s %s", p.role, r.Method, r.URL.Path))
			return
		}
		if len(p.namespaces) == 0 {
			h(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		switch {
		case byQueue:
			if err := p.checkQueue(r.PathValue("name"), ""); err != nil {
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
func (a *API) jobInScope(ctx context.Context, p *principal, id string) (*job.Job, error) {
	j, err := a.engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.allowsQueue(j.Queue) {
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
func (a *API) scopeItems(ctx context.Context, p *principal, ids []string) (keep []bool, err error) {
	keep = make([]bool, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		ok, done := seen[id]
		if !done {
			j, err := a.engine.Get(ctx, id)
			switch {
			case err == nil:
				ok = p.allowsQueue(j.Queue)
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
