package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/api"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/stream"
)

// nsPrefix is the namespace of the fixture's limited tokens.
const nsPrefix = "ns."

// authFixture is an API with auth on and, for every role, one token for
// every queue and one limited to nsPrefix.
type authFixture struct {
	t  *testing.T
	a  *API
	st *sqlitestore.Store
	n  atomic.Int64
}

func secretOf(role auth.Role, limited bool) string {
	scope := "all"
	if limited {
		scope = "ns"
	}
	return "s3cret-" + string(role) + "-" + scope + "-0123456789abcdef"
}

func fixtureTokens() []auth.Token {
	var tokens []auth.Token
	for _, role := range auth.Roles {
		tokens = append(tokens,
			auth.Token{Name: string(role) + "-all", Role: role, Secret: secretOf(role, false)},
			auth.Token{Name: string(role) + "-ns", Role: role, Namespaces: []string{nsPrefix}, Secret: secretOf(role, true)})
	}
	return tokens
}

func newAuthFixture(t *testing.T, logger *slog.Logger) *authFixture {
	t.Helper()
	au, err := auth.New(fixtureTokens())
	if err != nil {
		t.Fatal(err)
	}
	a, st := newTestAPIStore(t, Options{Auth: au, Logger: logger})
	return &authFixture{t: t, a: a, st: st}
}

// queue returns a fresh queue name inside the namespace or outside it.
func (f *authFixture) queue(inside bool) string {
	n := f.n.Add(1)
	if inside {
		return fmt.Sprintf("%sq%d", nsPrefix, n)
	}
	return fmt.Sprintf("other.q%d", n)
}

// enqueue adds a job to q through the engine and returns its id.
func (f *authFixture) enqueue(q string, delay time.Duration) string {
	f.t.Helper()
	res, err := f.a.engine.Enqueue(context.Background(), engine.EnqueueRequest{Queue: q, Kind: "k", Delay: delay})
	if err != nil {
		f.t.Fatalf("enqueue into %s: %v", q, err)
	}
	return res.ID
}

// schedule puts a schedule named name, every minute, whose job goes to
// queue q.
func (f *authFixture) schedule(name, q string) {
	f.t.Helper()
	_, _, err := f.a.engine.PutSchedule(context.Background(), engine.ScheduleRequest{
		Name: name, Timing: schedule.Timing{Every: time.Minute}, Job: json.RawMessage(fmt.Sprintf(`{"queue":%q,"kind":"k"}`, q)),
	})
	if err != nil {
		f.t.Fatalf("put schedule %s: %v", name, err)
	}
}

// active adds a job to q and leases it.
func (f *authFixture) active(q string) (id string, token int64) {
	f.t.Helper()
	id = f.enqueue(q, 0)
	jobs, err := f.a.engine.Fetch(context.Background(), engine.FetchRequest{Queues: []string{q}})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		f.t.Fatalf("fetch %s: %d jobs, %v", q, len(jobs), err)
	}
	return id, jobs[0].LeaseToken
}

func (f *authFixture) state(id string) job.State {
	f.t.Helper()
	j, err := f.a.engine.Get(context.Background(), id)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return j.State
}

// do sends one request with the Authorization header authz (none when
// empty). A request for the stream asks to upgrade, and a successful
// upgrade shows as status 101.
func (f *authFixture) do(method, path, body, authz string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	if strings.HasPrefix(path, "/v1/events") {
		// The event stream runs until its reader leaves: this one
		// leaves once the answer's head is written.
		ctx, cancel := context.WithTimeout(req.Context(), 50*time.Millisecond)
		defer cancel()
		req = req.WithContext(ctx)
	}
	if path != stream.Path {
		f.a.ServeHTTP(rec, req)
		return rec
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", stream.Protocol)
	f.a.ServeHTTP(&hijackRecorder{rec}, req)
	return rec
}

// hijackRecorder is a ResponseRecorder that the stream's upgrade can take
// over: it records the status line written after the hijack, then closes
// the connection, which ends the stream.
type hijackRecorder struct {
	*httptest.ResponseRecorder
}

// Hijack implements http.Hijacker.
func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	server, client := net.Pipe()
	go func() {
		line, _ := bufio.NewReader(client).ReadString('\n')
		if strings.HasPrefix(line, "HTTP/1.1 101 ") {
			h.Code = http.StatusSwitchingProtocols
		}
		_ = client.Close()
	}()
	return server, bufio.NewReadWriter(bufio.NewReader(server), bufio.NewWriter(server)), nil
}

// call is a request that succeeds for an admin token.
type call struct {
	path, body string
	// id is the job the call is about, if any.
	id string
	// verify, when set, checks a 2xx answer. allowed tells whether the
	// token may see the queue the call was built for; a route with verify
	// may answer 2xx to a token outside the namespace (listings, batches)
	// as long as verify passes.
	verify func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool)
}

// recipes build, for every route, a call on queue q that would succeed.
// TestAuthEveryRoute fails for a route without one, so that a new route
// cannot skip the auth test.
func recipes(f *authFixture) map[string]func(q string) call {
	activeCall := func(path, body string) func(q string) call {
		return func(q string) call {
			id, tok := f.active(q)
			return call{path: fmt.Sprintf(path, id), body: fmt.Sprintf(body, tok), id: id}
		}
	}
	batchCall := func(path string) func(q string) call {
		return func(q string) call {
			id, tok := f.active(q)
			return call{path: path, body: fmt.Sprintf(`{"items":[{"id":%q,"token":%d}]}`, id, tok), id: id,
				verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
					var out struct {
						Results []outcomeJSON `json:"results"`
					}
					if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) != 1 {
						t.Fatalf("batch answer %s: %v", rec.Body, err)
					}
					e := out.Results[0].Error
					if allowed && e != nil {
						t.Errorf("allowed item failed: %+v", e)
					}
					if !allowed {
						if e == nil || e.Code != CodeNotFound {
							t.Errorf("foreign item answered %+v, want not_found", out.Results[0])
						}
						if s := f.state(id); s != job.StateActive {
							t.Errorf("foreign item was applied: job is %s", s)
						}
					}
				}}
		}
	}
	jobCall := func(suffix, body string, delay time.Duration) func(q string) call {
		return func(q string) call {
			id := f.enqueue(q, delay)
			return call{path: "/v1/jobs/" + id + suffix, body: body, id: id}
		}
	}
	scheduleCall := func(suffix string) func(q string) call {
		return func(q string) call {
			f.schedule(q, q)
			return call{path: "/v1/schedules/" + q + suffix}
		}
	}
	queueCall := func(suffix, body string) func(q string) call {
		return func(q string) call {
			f.enqueue(q, 0)
			return call{path: "/v1/queues/" + q + suffix, body: body}
		}
	}
	groupCall := func(suffix, body string) func(q string) call {
		return func(q string) call {
			f.enqueue(q, 0)
			if _, _, err := f.a.engine.CreateConsumerGroup(context.Background(), engine.ConsumerGroupRequest{Queue: q, Name: "g"}); err != nil {
				f.t.Fatalf("create consumer group of %s: %v", q, err)
			}
			return call{path: "/v1/queues/" + q + "/consumer-groups/g" + suffix, body: body}
		}
	}
	return map[string]func(q string) call{
		"GET /v1/queues/{name}/consumer-groups":               queueCall("/consumer-groups", ""),
		"GET /v1/queues/{name}/consumer-groups/{group}":       groupCall("", ""),
		"PUT /v1/queues/{name}/consumer-groups/{group}":       queueCall("/consumer-groups/g", `{"start":"new"}`),
		"DELETE /v1/queues/{name}/consumer-groups/{group}":    groupCall("", ""),
		"POST /v1/queues/{name}/consumer-groups/{group}/seek": groupCall("/seek", `{"start":"beginning"}`),
		"GET /healthz":         func(string) call { return call{path: "/healthz"} },
		"GET /readyz":          func(string) call { return call{path: "/readyz"} },
		"GET /v1/openapi.json": func(string) call { return call{path: "/v1/openapi.json"} },
		"GET /v1/stream": func(string) call {
			// The stream names no queue: any token of any role opens it,
			// and each frame is checked as its route is.
			return call{path: stream.Path, verify: func(t *testing.T, rec *httptest.ResponseRecorder, _ bool) {
				if rec.Code != http.StatusSwitchingProtocols {
					t.Errorf("open stream: %d %s, want 101", rec.Code, rec.Body)
				}
			}}
		},
		"GET /v1/events": func(q string) call { return call{path: "/v1/events?queue=" + q} },
		"GET /metrics": func(q string) call {
			f.enqueue(q, 0)
			return call{path: "/metrics", verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
				if !allowed {
					t.Errorf("metrics answered %d to a token limited to namespaces", rec.Code)
				}
				if want := fmt.Sprintf(`spool_jobs{queue=%q,state="available"} 1`, q); !strings.Contains(rec.Body.String(), want) {
					t.Errorf("metrics lack %s:\n%s", want, rec.Body)
				}
			}}
		},
		"POST /v1/jobs": func(q string) call { return call{path: "/v1/jobs", body: fmt.Sprintf(`{"queue":%q,"kind":"k"}`, q)} },
		"POST /v1/jobs/batch": func(q string) call {
			return call{path: "/v1/jobs/batch", body: fmt.Sprintf(`{"jobs":[{"queue":%q,"kind":"k"},{"queue":%q,"kind":"k"}]}`, f.queue(true), q)}
		},
		"GET /v1/jobs": func(q string) call {
			id := f.enqueue(q, 0)
			return call{path: "/v1/jobs?queue=" + q, verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
				if !allowed {
					t.Errorf("listing of a foreign queue answered %d", rec.Code)
				}
				if !strings.Contains(rec.Body.String(), id) {
					t.Errorf("listing lacks job %s: %s", id, rec.Body)
				}
			}}
		},
		"GET /v1/jobs/{id}":         jobCall("", "", 0),
		"DELETE /v1/jobs/{id}":      jobCall("", "", 0),
		"POST /v1/jobs/{id}/cancel": jobCall("/cancel", "", 0),
		"POST /v1/jobs/{id}/retry":  jobCall("/retry", "", time.Hour),
		"POST /v1/fetch": func(q string) call {
			f.enqueue(q, 0)
			return call{path: "/v1/fetch", body: fmt.Sprintf(`{"queues":[%q,%q],"max":5}`, f.queue(true), q)}
		},
		"POST /v1/jobs/{id}/ack":      activeCall("/v1/jobs/%s/ack", `{"token":%d,"result":1}`),
		"POST /v1/jobs/{id}/fail":     activeCall("/v1/jobs/%s/fail", `{"token":%d,"error":"boom"}`),
		"POST /v1/jobs/{id}/extend":   activeCall("/v1/jobs/%s/extend", `{"token":%d}`),
		"POST /v1/jobs/{id}/release":  activeCall("/v1/jobs/%s/release", `{"token":%d}`),
		"POST /v1/jobs/{id}/progress": activeCall("/v1/jobs/%s/progress", `{"token":%d,"progress":{"pct":5}}`),
		"POST /v1/jobs/ack":           batchCall("/v1/jobs/ack"),
		"POST /v1/jobs/fail":          batchCall("/v1/jobs/fail"),
		"POST /v1/jobs/extend":        batchCall("/v1/jobs/extend"),
		"POST /v1/jobs/release":       batchCall("/v1/jobs/release"),
		"POST /v1/transactions": func(q string) call {
			id, tok := f.active(q)
			return call{path: "/v1/transactions", id: id,
				body: fmt.Sprintf(`{"ack":[{"id":%q,"token":%d}],"enqueue":[{"queue":%q,"kind":"k"}]}`, id, tok, q)}
		},
		"GET /v1/queues": func(q string) call {
			f.enqueue(q, 0)
			return call{path: "/v1/queues", verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
				var out queuesJSON
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
					t.Fatalf("queue list %s: %v", rec.Body, err)
				}
				var names []string
				for _, qu := range out.Queues {
					names = append(names, qu.Name)
				}
				if slices.Contains(names, q) != allowed {
					t.Errorf("queue list %v: holds %s = %v, want %v", names, q, !allowed, allowed)
				}
			}}
		},
		"GET /v1/queues/{name}":             queueCall("", ""),
		"POST /v1/queues/{name}/pause":      queueCall("/pause", ""),
		"POST /v1/queues/{name}/resume":     queueCall("/resume", ""),
		"POST /v1/queues/{name}/durability": queueCall("/durability", `{"durability":"process"}`),
		"PUT /v1/queues/{name}/limits":      queueCall("/limits", `{"max_active":3,"group_rate":{"limit":5,"period_ms":1000}}`),
		"PATCH /v1/queues/{name}/limits":    queueCall("/limits", `{"max_active":null,"group_max_active":2}`),
		"DELETE /v1/queues/{name}/limits":   queueCall("/limits", ""),
		"PUT /v1/queues/{name}/settings":    queueCall("/settings", `{"max_wait_ms":60000}`),
		"PATCH /v1/queues/{name}/settings":  queueCall("/settings", `{"default_lease_ms":300000,"max_wait_ms":null}`),
		"DELETE /v1/queues/{name}/settings": queueCall("/settings", ""),
		"POST /v1/queues/{name}/purge":      queueCall("/purge", ""),
		"POST /v1/queues/{name}/retry":      queueCall("/retry", `{"state":"dead"}`),
		"POST /v1/queues/{name}/delete":     queueCall("/delete", `{"state":"dead"}`),
		"GET /v1/schedules": func(q string) call {
			f.schedule(q, q)
			return call{path: "/v1/schedules", verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
				var out schedulesJSON
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
					t.Fatalf("schedule list %s: %v", rec.Body, err)
				}
				var names []string
				for _, s := range out.Schedules {
					names = append(names, s.Name)
				}
				if slices.Contains(names, q) != allowed {
					t.Errorf("schedule list %v: holds %s = %v, want %v", names, q, !allowed, allowed)
				}
			}}
		},
		"GET /v1/schedules/{name}": scheduleCall(""),
		"GET /v1/workers": func(q string) call {
			f.enqueue(q, 0)
			if _, err := f.a.engine.Fetch(context.Background(), engine.FetchRequest{Queues: []string{q}, Worker: "w-" + q}); err != nil {
				f.t.Fatalf("fetch %s: %v", q, err)
			}
			return call{path: "/v1/workers", verify: func(t *testing.T, rec *httptest.ResponseRecorder, allowed bool) {
				if !allowed {
					t.Errorf("the workers answered %d to a token limited to namespaces", rec.Code)
				}
				if !strings.Contains(rec.Body.String(), `"name":"w-`+q+`"`) {
					t.Errorf("the workers lack w-%s: %s", q, rec.Body)
				}
			}}
		},
		"PUT /v1/schedules/{name}": func(q string) call {
			return call{path: "/v1/schedules/" + q, body: fmt.Sprintf(`{"every_ms":60000,"job":{"queue":%q,"kind":"k"}}`, q)}
		},
		"DELETE /v1/schedules/{name}":       scheduleCall(""),
		"POST /v1/schedules/{name}/pause":   scheduleCall("/pause"),
		"POST /v1/schedules/{name}/resume":  scheduleCall("/resume"),
		"POST /v1/schedules/{name}/trigger": scheduleCall("/trigger"),
	}
}

// is2xx reports whether code is a success: 2xx, or the 101 of the
// stream's upgrade.
func is2xx(code int) bool { return code >= 200 && code < 300 || code == http.StatusSwitchingProtocols }

// errorCode decodes an error answer, failing the test unless it is one.
func errorCode(t *testing.T, rec *httptest.ResponseRecorder) Code {
	t.Helper()
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code == "" {
		t.Fatalf("answer %d is not an error body: %q", rec.Code, rec.Body)
	}
	if want := Catalog[body.Error.Code]; want != rec.Code {
		t.Errorf("code %s came with status %d, want %d", body.Error.Code, rec.Code, want)
	}
	return body.Error.Code
}

// TestAuthEveryRoute walks the router's own route table and proves that no
// route answers 2xx without a valid token of a role allowed the route and
// a namespace holding the route's queue, that a job of a foreign namespace
// is answered exactly like a missing job, and that every allowed token is
// served.
func TestAuthEveryRoute(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	rs := recipes(f)
	for _, rt := range f.a.Routes() {
		key := rt.Method + " " + rt.Pattern
		build, ok := rs[key]
		if !ok {
			t.Errorf("%s has no recipe in recipes(): add one so that its auth is tested", key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			if rt.Permission == auth.PermPublic {
				c := build(f.queue(true))
				if rec := f.do(rt.Method, c.path, c.body, ""); !is2xx(rec.Code) {
					t.Fatalf("public route without a token: %d %s", rec.Code, rec.Body)
				}
				return
			}
			bad := []string{
				"",
				"Bearer ",
				"Bearer not-a-known-token-0123456789",
				"Bearer " + secretOf(auth.RoleAdmin, false) + "x",
				"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+secretOf(auth.RoleAdmin, false))),
				secretOf(auth.RoleAdmin, false),
			}
			for _, authz := range bad {
				c := build(f.queue(true))
				rec := f.do(rt.Method, c.path, c.body, authz)
				if rec.Code != http.StatusUnauthorized || errorCode(t, rec) != CodeUnauthorized {
					t.Errorf("Authorization %q: %d %s, want 401 unauthorized", authz, rec.Code, rec.Body)
				}
				if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without WWW-Authenticate: Bearer")
				}
			}
			for _, role := range auth.Roles {
				for _, limited := range []bool{false, true} {
					for _, inside := range []bool{true, false} {
						c := build(f.queue(inside))
						rec := f.do(rt.Method, c.path, c.body, "bearer "+secretOf(role, limited))
						who := fmt.Sprintf("%s token (limited %v) on a queue inside %v", role, limited, inside)
						// A route about every queue serves no limited token.
						allowed := !limited || (inside && rt.Scope.Source != ScopeAllQueues)
						switch {
						case !role.Allows(rt.Permission):
							if rec.Code != http.StatusForbidden || errorCode(t, rec) != CodeForbidden {
								t.Errorf("%s: %d %s, want 403 forbidden", who, rec.Code, rec.Body)
							}
						case allowed:
							if !is2xx(rec.Code) {
								t.Errorf("%s: %d %s, want 2xx", who, rec.Code, rec.Body)
							} else if c.verify != nil {
								c.verify(t, rec, true)
							}
						case is2xx(rec.Code):
							if c.verify == nil {
								t.Errorf("%s: %d %s, want no 2xx", who, rec.Code, rec.Body)
							} else {
								c.verify(t, rec, false)
								f.sameAsMissing(t, rt, c, rec, secretOf(role, limited))
							}
						default:
							errorCode(t, rec)
							f.sameAsMissing(t, rt, c, rec, secretOf(role, limited))
						}
					}
				}
			}
		})
	}
}

// sameAsMissing checks that the answer rec to a call about a foreign job
// is byte for byte the answer to the same call about a job that does not
// exist.
func (f *authFixture) sameAsMissing(t *testing.T, rt Route, c call, rec *httptest.ResponseRecorder, secret string) {
	t.Helper()
	if c.id == "" {
		return
	}
	const missing = "01NOSVCHJ0B000000000000000"
	path := strings.Replace(c.path, c.id, missing, 1)
	body := strings.Replace(c.body, c.id, missing, 1)
	got := f.do(rt.Method, path, body, "Bearer "+secret)
	foreign := strings.ReplaceAll(rec.Body.String(), c.id, missing)
	if got.Code != rec.Code || got.Body.String() != foreign {
		t.Errorf("foreign job answered %d %s; a missing job %d %s", rec.Code, rec.Body, got.Code, got.Body)
	}
}

func TestAuthListJobsNeedsQueueWhenLimited(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	f.enqueue(f.queue(false), 0)
	rec := f.do("GET", "/v1/jobs", "", "Bearer "+secretOf(auth.RoleReadOnly, true))
	if rec.Code != http.StatusForbidden || errorCode(t, rec) != CodeForbidden {
		t.Errorf("listing every queue with a limited token: %d %s, want 403", rec.Code, rec.Body)
	}
	if rec := f.do("GET", "/v1/jobs", "", "Bearer "+secretOf(auth.RoleReadOnly, false)); rec.Code != http.StatusOK {
		t.Errorf("listing every queue with an unlimited token: %d %s", rec.Code, rec.Body)
	}
}

func TestAuthDefaultQueueIsChecked(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	rec := f.do("POST", "/v1/jobs", `{"kind":"k"}`, "Bearer "+secretOf(auth.RoleProducer, true))
	if rec.Code != http.StatusForbidden {
		t.Errorf("enqueue into the default queue outside the namespace: %d %s, want 403", rec.Code, rec.Body)
	}
}

// A batch with a foreign item applies the other items and answers the
// foreign one as missing.
func TestAuthBatchMixesForeignAndOwnItems(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	own, ownTok := f.active(f.queue(true))
	foreign, foreignTok := f.active(f.queue(false))
	body := fmt.Sprintf(`{"items":[{"id":%q,"token":%d},{"id":%q,"token":%d},{"id":%q,"token":%d}]}`,
		foreign, foreignTok, own, ownTok, "nosuchjob", 1)
	rec := f.do("POST", "/v1/jobs/ack", body, "Bearer "+secretOf(auth.RoleWorker, true))
	if rec.Code != http.StatusOK {
		t.Fatalf("batch ack: %d %s", rec.Code, rec.Body)
	}
	var out resultsJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 3 || out.Results[0].Error == nil || out.Results[1].Error != nil || out.Results[2].Error == nil {
		t.Fatalf("results %s", rec.Body)
	}
	if *out.Results[0].Error != *out.Results[2].Error {
		t.Errorf("foreign item error %+v differs from missing item error %+v", out.Results[0].Error, out.Results[2].Error)
	}
	if s := f.state(foreign); s != job.StateActive {
		t.Errorf("foreign job is %s, want it untouched (active)", s)
	}
	if s := f.state(own); s != job.StateCompleted {
		t.Errorf("own job is %s, want completed", s)
	}
}

func TestAuthOffNeedsNoToken(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(`{"kind":"k"}`)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("enqueue without auth: %d %s", rec.Code, rec.Body)
	}
}

func TestRouteWithoutPermissionPanics(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, perm := range []auth.Permission{"", "everything"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering a route with permission %q did not panic", perm)
				}
			}()
			a.handle(route{"GET", "/v1/new-" + string(perm), perm, noQueue, plain(a.healthz)})
		}()
	}
	for _, rt := range newTestAPI(t).Routes() {
		if !rt.Permission.Valid() {
			t.Errorf("%s %s: permission %q", rt.Method, rt.Pattern, rt.Permission)
		}
	}
}

// A route whose scope is left out, or does not fit its pattern, its
// permission or its endpoint, stops the API's start: no route can be
// added without declaring which queues it touches, and no declaration
// can go unchecked.
func TestRouteWithoutScopePanics(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	enqueueScope := queueInBody("queue", (*wire.EnqueueJob).QueueName)
	for name, rt := range map[string]route{
		"no scope":                  {"GET", "/v1/new", auth.PermRead, scope{}, plain(a.healthz)},
		"no endpoint":               {"GET", "/v1/new", auth.PermRead, noQueue, endpoint{}},
		"job id named nowhere":      {"GET", "/v1/new/{id}", auth.PermRead, noQueue, plain(a.healthz)},
		"queue name named nowhere":  {"GET", "/v1/new/{name}", auth.PermRead, noQueue, plain(a.healthz)},
		"a path scope without path": {"GET", "/v1/new", auth.PermRead, jobInPath, plain(a.healthz)},
		"a public scoped route":     {"GET", "/v1/new/{name}", auth.PermPublic, queueInPath, plain(a.healthz)},
		"a body scope, no body":     {"POST", "/v1/new", auth.PermEnqueue, enqueueScope, plain(a.healthz)},
		"a body scope, other body":  {"POST", "/v1/new", auth.PermEnqueue, enqueueScope, withBody(a.enqueueBatch)},
		"items without their scope": {"POST", "/v1/new", auth.PermWork, noQueue, leaseBatch(a.ackOp())},
		"items of another kind":     {"POST", "/v1/new", auth.PermWork, jobsInBody("items[].id", itemIDs[failItem]), leaseBatch(a.ackOp())},
		"one queue in an array":     {"POST", "/v1/new", auth.PermEnqueue, queueInBody("jobs[].queue", (*wire.EnqueueJob).QueueName), withBody(a.enqueue)},
		"many queues in one field":  {"POST", "/v1/new", auth.PermEnqueue, queuesInBody("jobs", enqueueBatchQueues), withBody(a.enqueueBatch)},
		"a listing without its cut": {"GET", "/v1/new", auth.PermRead, noQueue, queueListing(a.listQueues)},
		"a query without its check": {"GET", "/v1/new", auth.PermRead, noQueue, withQuery(parseJobsQuery, a.listJobs)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering a route with %s did not panic", name)
				}
			}()
			a.handle(rt)
		}()
	}
}

// Secrets appear nowhere in the logs, whether the call was refused,
// served, or failed inside the server.
func TestAuthTokensNeverLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newAuthFixture(t, logger)
	admin := secretOf(auth.RoleAdmin, false)
	wrong := "wrong-but-well-formed-secret-42"
	for _, authz := range []string{"Bearer " + admin, "Bearer " + wrong, "Bearer " + secretOf(auth.RoleReadOnly, true)} {
		f.do("POST", "/v1/jobs", `{"kind":"k"}`, authz)
		f.do("GET", "/v1/jobs/nosuchjob", "", authz)
		f.do("POST", "/v1/fetch", `{"queues":["q"]}`, authz)
	}
	// An internal error is logged with detail: the store is gone.
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	rec := f.do("GET", "/v1/jobs/some-job", "", "Bearer "+admin)
	if rec.Code < 500 {
		t.Fatalf("call on a closed engine: %d %s, want a 5xx to be logged", rec.Code, rec.Body)
	}
	f.do("GET", "/v1/queues", "", "Bearer "+admin)
	if logs.Len() == 0 {
		t.Fatal("nothing was logged; the test proves nothing")
	}
	for _, tok := range fixtureTokens() {
		if strings.Contains(logs.String(), tok.Secret) {
			t.Errorf("the logs hold the secret of token %s", tok.Name)
		}
	}
	if strings.Contains(logs.String(), wrong) {
		t.Error("the logs hold a presented (wrong) secret")
	}
}

// authTableRow matches a row of the protocol's permission table:
// "| `read` | `GET /v1/jobs`, … | admin, producer, worker, read-only |".
// Its second column names routes, which tells it from a row of a table of
// fields named like a permission ("| `enqueue` | object[] | …").
var authTableRow = regexp.MustCompile("(?m)^\\|\\s*`(public|read|enqueue|work|transact|manage)`\\s*\\|([^|]*`(?:GET|POST|PUT|PATCH|DELETE) [^|]*)\\|([^|]*)\\|")

var routeSpan = regexp.MustCompile("`(GET|POST|DELETE|PUT|PATCH) ([^`]+)`")

// The Auth section of docs/protocol.md gives every route the permission
// the router declares, and every permission the roles the code grants.
func TestPermissionsMatchTheProtocol(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]auth.Permission{}
	rows := authTableRow.FindAllStringSubmatch(string(data), -1)
	if len(rows) != len(auth.Permissions) {
		t.Fatalf("found %d rows of the permission table, want %d", len(rows), len(auth.Permissions))
	}
	for _, row := range rows {
		perm := auth.Permission(row[1])
		for _, m := range routeSpan.FindAllStringSubmatch(row[2], -1) {
			documented[m[1]+" "+m[2]] = perm
		}
		var roles []string
		for _, r := range auth.Roles {
			if perm != auth.PermPublic && r.Allows(perm) {
				roles = append(roles, string(r))
			}
		}
		if perm == auth.PermPublic {
			roles = []string{"anyone, no token needed"}
		}
		if got := strings.TrimSpace(row[3]); got != strings.Join(roles, ", ") {
			t.Errorf("permission %s: protocol grants it to %q, the code to %q", perm, got, strings.Join(roles, ", "))
		}
	}
	a := newTestAPI(t)
	for _, rt := range a.Routes() {
		key := rt.Method + " " + rt.Pattern
		if documented[key] != rt.Permission {
			t.Errorf("%s: protocol says %q, router says %q", key, documented[key], rt.Permission)
		}
		delete(documented, key)
	}
	for key := range documented {
		t.Errorf("%s is in the permission table but not a route", key)
	}
}

// Every operation of the OpenAPI document names the permission the router
// declares for it, and only public operations drop the bearer scheme.
func TestPermissionsMatchOpenAPI(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Permission string             `json:"x-spool-permission"`
			Security   *[]json.RawMessage `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, rt := range newTestAPI(t).Routes() {
		op, ok := doc.Paths[rt.Pattern][strings.ToLower(rt.Method)]
		if !ok {
			continue // reported by TestRoutesMatchOpenAPI
		}
		if op.Permission != string(rt.Permission) {
			t.Errorf("%s %s: x-spool-permission %q, router says %q", rt.Method, rt.Pattern, op.Permission, rt.Permission)
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != (rt.Permission == auth.PermPublic) {
			t.Errorf("%s %s: security: [] is %v, but permission is %s", rt.Method, rt.Pattern, public, rt.Permission)
		}
	}
}
