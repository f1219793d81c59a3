package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/stream"
)

// unscopedRoutes are the routes that name no queue. A route declared
// with noQueue must be listed here, so that declaring a route that names
// queues as naming none does not pass unseen.
var unscopedRoutes = []string{"GET /healthz", "GET /readyz", "GET /v1/openapi.json", "GET " + stream.Path, "GET /v1/events"}

// foreignTarget is what a refused request names outside the namespace.
type foreignTarget struct {
	queue string // a queue holding jobs in several states
	id    string // an active job of that queue
	token int64  // its lease token
}

// scopeCall is a request built from a route's declared scope, naming a
// queue or job outside the namespace where the scope says the route's
// queues come from.
type scopeCall struct {
	method, target, body string
	// check verifies the answer, over HTTP or in a frame.
	check func(t *testing.T, status int, body []byte)
}

// TestScopeEveryRoute walks the route table and, with every token limited
// to the namespace nsPrefix whose role has the route's permission, sends
// each route a request naming a queue or job of another namespace where
// the route's declared scope says its queues come from. Each is refused
// as docs/protocol.md says: 403 forbidden naming the field for a queue in
// a path, a body or a query; 404 not_found, byte for byte the answer of a
// missing job, for a job id in the path; a not_found item, like a missing
// job's, for the ids of batch items; a queue list without the foreign
// queue. The store holds the same jobs and queues afterwards, and the
// same request sent in a frame of a stream gets the same answer. The
// requests are built from Routes(), so a new route is covered as soon as
// it is registered.
func TestScopeEveryRoute(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	srv := httptest.NewServer(f.a)
	t.Cleanup(srv.Close)
	streams := map[auth.Role]*stream.Conn{}
	for _, role := range auth.Roles {
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		c, err := stream.Dial(ctx, stream.Config{URL: srv.URL, Header: bearer(secretOf(role, true))})
		cancel()
		if err != nil {
			t.Fatalf("open a stream for a %s token: %v", role, err)
		}
		t.Cleanup(c.Close)
		streams[role] = c
	}
	t.Cleanup(func() { _ = f.a.CloseStreams(context.Background()) })

	for _, rt := range f.a.Routes() {
		key := rt.Method + " " + rt.Pattern
		if rt.Scope.Source == ScopeNone {
			if !slices.Contains(unscopedRoutes, key) {
				t.Errorf("%s is declared to name no queue; declare where its queues come from, or list it in unscopedRoutes", key)
			}
			continue
		}
		t.Run(key, func(t *testing.T) {
			for _, role := range auth.Roles {
				if !role.Allows(rt.Permission) {
					continue
				}
				for _, c := range f.scopeCalls(t, rt, secretOf(role, true)) {
					who := fmt.Sprintf("%s %s (%s token limited to %s, body %s)", c.method, c.target, role, nsPrefix, c.body)
					before := f.snapshot(t)
					rec := f.do(c.method, c.target, c.body, "Bearer "+secretOf(role, true))
					c.check(t, rec.Code, rec.Body.Bytes())
					if after := f.snapshot(t); after != before {
						t.Errorf("%s changed the store:\nbefore %s\nafter  %s", who, before, after)
					}
					ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
					a, err := streams[role].Do(ctx, c.method, c.target, []byte(c.body))
					cancel()
					if err != nil || a.Status != rec.Code || string(a.Body) != rec.Body.String() {
						t.Errorf("%s in a frame: %v %d %s; over HTTP %d %s", who, err, a.Status, a.Body, rec.Code, rec.Body)
					}
					if after := f.snapshot(t); after != before {
						t.Errorf("%s in a frame changed the store", who)
					}
				}
			}
		})
	}
}

// scopeCalls builds the refused requests of rt from its declared scope,
// for the token secret. A request about a job is compared with the same
// request, with the same token, about a job that does not exist.
func (f *authFixture) scopeCalls(t *testing.T, rt Route, secret string) []scopeCall {
	fg := f.foreign()
	path := strings.NewReplacer("{name}", fg.queue, "{id}", fg.id).Replace(rt.Pattern)
	body := ""
	if rt.Method == "POST" {
		body = fmt.Sprintf(`{"token":%d}`, fg.token)
	}
	switch rt.Scope.Source {
	case ScopePathQueue:
		calls := []scopeCall{{rt.Method, path, body, wantForbidden("")}}
		if field := rt.Scope.BodyField; field != "" {
			// A queue of its own in the path, a foreign one in the body.
			own := strings.Replace(rt.Pattern, "{name}", f.queue(true), 1)
			calls = append(calls, scopeCall{rt.Method, own, bodyNaming(t, field, []string{fg.queue}, ""), wantForbidden(field)})
		}
		return calls
	case ScopePathJob:
		want := f.do(rt.Method, strings.Replace(path, fg.id, missingJob, 1), body, "Bearer "+secret)
		return []scopeCall{{rt.Method, path, body, func(t *testing.T, status int, got []byte) {
			t.Helper()
			if status != http.StatusNotFound || status != want.Code || strings.ReplaceAll(string(got), fg.id, missingJob) != want.Body.String() {
				t.Errorf("a job of another namespace: %d %s; a missing job: %d %s", status, got, want.Code, want.Body)
			}
		}}}
	case ScopeQuery:
		return []scopeCall{
			{rt.Method, path + "?" + rt.Scope.Field + "=" + fg.queue, "", wantForbidden(rt.Scope.Field)},
			{rt.Method, path, "", wantForbidden(rt.Scope.Field)},
		}
	case ScopeBodyQueues:
		names, field := []string{fg.queue}, rt.Scope.Field
		if strings.Contains(field, "[]") {
			names, field = []string{f.queue(true), fg.queue}, strings.Replace(field, "[]", "[1]", 1)
		}
		calls := []scopeCall{{rt.Method, path, bodyNaming(t, rt.Scope.Field, names, ""), wantForbidden(field)}}
		if !strings.HasSuffix(rt.Scope.Field, "[]") {
			// A job that names no queue goes to the default queue, which
			// is outside the namespace.
			names[len(names)-1] = ""
			calls = append(calls, scopeCall{rt.Method, path, bodyNaming(t, rt.Scope.Field, names, ""), wantForbidden(field)})
		}
		return calls
	case ScopeBodyJobs:
		// The items of these routes are lease items, with their token.
		token := fmt.Sprintf(`"token":%d`, fg.token)
		rec := f.do(rt.Method, path, bodyNaming(t, rt.Scope.Field, []string{missingJob}, token), "Bearer "+secret)
		var missing resultsJSON
		if err := json.Unmarshal(rec.Body.Bytes(), &missing); err != nil || len(missing.Results) != 1 || missing.Results[0].Error == nil {
			t.Fatalf("%s %s about a missing job: %d %s", rt.Method, path, rec.Code, rec.Body)
		}
		return []scopeCall{{rt.Method, path, bodyNaming(t, rt.Scope.Field, []string{fg.id}, token), func(t *testing.T, status int, got []byte) {
			t.Helper()
			var out resultsJSON
			if err := json.Unmarshal(got, &out); status != http.StatusOK || err != nil || len(out.Results) != 1 ||
				out.Results[0].Error == nil || *out.Results[0].Error != *missing.Results[0].Error || out.Results[0].Error.Code != CodeNotFound {
				t.Errorf("an item of another namespace: %d %s; a missing one: %+v", status, got, missing.Results[0].Error)
			}
		}}}
	case ScopeBodyTransaction:
		return f.transactionScopeCalls(t, rt, path, secret, fg)
	case ScopeQueueList:
		own := f.queue(true)
		f.enqueue(own, 0)
		return []scopeCall{{rt.Method, path, "", func(t *testing.T, status int, got []byte) {
			t.Helper()
			var out queuesJSON
			if err := json.Unmarshal(got, &out); status != http.StatusOK || err != nil {
				t.Fatalf("queue list: %d %s", status, got)
			}
			var names []string
			for _, q := range out.Queues {
				names = append(names, q.Name)
			}
			if slices.Contains(names, fg.queue) || !slices.Contains(names, own) {
				t.Errorf("queue list %v: want %s in it and %s not", names, own, fg.queue)
			}
		}}}
	case ScopePathSchedule:
		return f.scheduleScopeCalls(t, rt, secret, fg)
	case ScopeAllQueues:
		// The route answers about every queue, its own and the foreign
		// one alike: a limited token gets nothing.
		f.enqueue(f.queue(true), 0)
		return []scopeCall{{rt.Method, path, "", wantForbidden("")}}
	case ScopeScheduleList:
		own, smuggled := f.queue(true), f.queue(true)
		f.schedule(own, own)
		f.schedule(smuggled, fg.queue)
		f.schedule(fg.queue, fg.queue)
		return []scopeCall{{rt.Method, path, "", func(t *testing.T, status int, got []byte) {
			t.Helper()
			var out schedulesJSON
			if err := json.Unmarshal(got, &out); status != http.StatusOK || err != nil {
				t.Fatalf("schedule list: %d %s", status, got)
			}
			var names []string
			for _, s := range out.Schedules {
				names = append(names, s.Name)
			}
			if !slices.Contains(names, own) || slices.Contains(names, smuggled) || slices.Contains(names, fg.queue) {
				t.Errorf("schedule list %v: want %s in it, and neither %s (whose job goes to %s) nor %s", names, own, smuggled, fg.queue, fg.queue)
			}
		}}}
	}
	t.Fatalf("%s %s: scope %q has no test here; teach scopeCalls to build a request naming a foreign queue for it", rt.Method, rt.Pattern, rt.Scope.Source)
	return nil
}

// scheduleScopeCalls builds the refused requests of a route naming a
// schedule: one named outside the namespace (403); one named inside it
// whose job goes to a foreign queue (answered like a missing schedule, or
// 403 to a redefinition); and, for a route with a body, a job template
// naming a foreign queue or none (403 naming job.queue).
func (f *authFixture) scheduleScopeCalls(t *testing.T, rt Route, secret string, fg foreignTarget) []scopeCall {
	t.Helper()
	at := func(name string) string { return strings.Replace(rt.Pattern, "{name}", name, 1) }
	body := func(queue string) string {
		if rt.Method != "PUT" {
			return ""
		}
		if queue == "" {
			return `{"every_ms":60000,"job":{"kind":"k"}}`
		}
		return fmt.Sprintf(`{"every_ms":60000,"job":{"queue":%q,"kind":"k"}}`, queue)
	}
	f.schedule(fg.queue, fg.queue)
	smuggled := f.queue(true)
	f.schedule(smuggled, fg.queue)
	calls := []scopeCall{{rt.Method, at(fg.queue), body(f.queue(true)), wantForbidden("")}}
	if rt.Method == "PUT" {
		fresh := f.queue(true)
		return append(calls,
			scopeCall{rt.Method, at(smuggled), body(f.queue(true)), wantForbidden("")},
			scopeCall{rt.Method, at(fresh), body(fg.queue), wantForbidden(scheduleJobField)},
			scopeCall{rt.Method, at(fresh), body(""), wantForbidden(scheduleJobField)})
	}
	missing := f.queue(true)
	want := f.do(rt.Method, at(missing), "", "Bearer "+secret)
	return append(calls, scopeCall{rt.Method, at(smuggled), "", func(t *testing.T, status int, got []byte) {
		t.Helper()
		if status != http.StatusNotFound || status != want.Code || strings.ReplaceAll(string(got), smuggled, missing) != want.Body.String() {
			t.Errorf("a schedule whose job goes to another namespace: %d %s; a missing schedule: %d %s", status, got, want.Code, want.Body)
		}
	}})
}

// transactionScopeCalls builds the refused requests of a transaction
// route: a job to enqueue into a foreign queue, or into the default queue
// (403 naming the job's queue); a foreign job to ack or fail beside jobs
// of the namespace, answered byte for byte as a missing job is, whether
// the transaction refuses it (404 naming its id) or an earlier item whose
// token is not current (409 naming that token).
func (f *authFixture) transactionScopeCalls(t *testing.T, rt Route, path, secret string, fg foreignTarget) []scopeCall {
	t.Helper()
	own := f.queue(true)
	id, token := f.active(own)
	enqueue := fmt.Sprintf(`{"queue":%q,"kind":"k"}`, own)
	calls := []scopeCall{
		{rt.Method, path, fmt.Sprintf(`{"enqueue":[%s,{"queue":%q,"kind":"k"}]}`, enqueue, fg.queue), wantForbidden("enqueue[1].queue")},
		{rt.Method, path, fmt.Sprintf(`{"ack":[{"id":%q,"token":%d}],"enqueue":[{"kind":"k"}]}`, id, token), wantForbidden("enqueue[0].queue")},
	}
	for _, c := range []struct {
		format string // of the body, with the foreign job's id and token
		code   Code
		field  string
	}{
		{`{"ack":[{"id":%q,"token":%d},{"id":%%q,"token":%%d}],"enqueue":[%s]}`, CodeNotFound, "ack[1].id"},
		{`{"ack":[{"id":%q,"token":%d}],"fail":[{"id":%%q,"token":%%d,"error":"x"}],"enqueue":[%s]}`, CodeNotFound, "fail[0].id"},
		{`{"fail":[{"id":%q,"token":%d,"error":"x"},{"id":%%q,"token":%%d}],"enqueue":[%s]}`, CodeNotFound, "fail[1].id"},
	} {
		format := fmt.Sprintf(c.format, id, token, enqueue)
		calls = append(calls, f.likeMissing(t, rt, path, secret, fg, format, c.code, c.field))
	}
	stale := fmt.Sprintf(`{"ack":[{"id":%q,"token":%d},{"id":%%q,"token":%%d}]}`, id, token+1000)
	return append(calls, f.likeMissing(t, rt, path, secret, fg, stale, CodeLeaseLost, "ack[0].token"))
}

// likeMissing is a request whose body, made by format from the foreign
// job's id and token, must be answered with code naming field, byte for
// byte as the same request about a job that does not exist.
func (f *authFixture) likeMissing(t *testing.T, rt Route, path, secret string, fg foreignTarget, format string, code Code, field string) scopeCall {
	t.Helper()
	want := f.do(rt.Method, path, fmt.Sprintf(format, missingJob, fg.token), "Bearer "+secret)
	var e errorBody
	if err := json.Unmarshal(want.Body.Bytes(), &e); err != nil || e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("%s %s about a missing job: %d %s, want %s on %s", rt.Method, path, want.Code, want.Body, code, field)
	}
	return scopeCall{rt.Method, path, fmt.Sprintf(format, fg.id, fg.token), func(t *testing.T, status int, got []byte) {
		t.Helper()
		if status != want.Code || strings.ReplaceAll(string(got), fg.id, missingJob) != want.Body.String() {
			t.Errorf("a job of another namespace: %d %s; a missing job: %d %s", status, got, want.Code, want.Body)
		}
	}}
}

// missingJob is an id no job has.
const missingJob = "01NOSVCHJ0B000000000000000"

// foreign returns a queue outside the namespace holding an available, a
// scheduled and an active job, whose id and token it returns too.
func (f *authFixture) foreign() foreignTarget {
	q := f.queue(false)
	f.enqueue(q, time.Hour)
	id, token := f.active(q)
	f.enqueue(q, 0)
	return foreignTarget{queue: q, id: id, token: token}
}

// bodyFieldPath is the form of the body fields bodyNaming can fill: a
// field, an array, or a field of an array's objects.
var bodyFieldPath = regexp.MustCompile(`^[a-z_]+(\[\](\.[a-z_]+)?)?$`)

// bodyNaming builds the smallest body that holds names at field, a body
// field path of a Scope whose [] stands for the elements of an array: one
// element per name, a name "" being left out of its object. extra, when
// set, is a member put beside each name.
func bodyNaming(t *testing.T, field string, names []string, extra string) string {
	t.Helper()
	if !bodyFieldPath.MatchString(field) {
		t.Fatalf("scope field %q: teach bodyNaming to build a body for it", field)
	}
	object := func(key, name string) string {
		var members []string
		if name != "" {
			members = append(members, fmt.Sprintf("%q:%q", key, name))
		}
		if extra != "" {
			members = append(members, extra)
		}
		return "{" + strings.Join(members, ",") + "}"
	}
	array, leaf, isArray := strings.Cut(field, "[]")
	if !isArray {
		return object(field, names[0])
	}
	elems := make([]string, len(names))
	for i, name := range names {
		if leaf == "" {
			elems[i] = strconv.Quote(name)
		} else {
			elems[i] = object(strings.TrimPrefix(leaf, "."), name)
		}
	}
	return fmt.Sprintf("{%q:[%s]}", array, strings.Join(elems, ","))
}

// wantForbidden checks for 403 forbidden naming field.
func wantForbidden(field string) func(t *testing.T, status int, body []byte) {
	return func(t *testing.T, status int, body []byte) {
		t.Helper()
		var e errorBody
		if err := json.Unmarshal(body, &e); err != nil || status != http.StatusForbidden || e.Error.Code != CodeForbidden || e.Error.Field != field {
			t.Errorf("%d %s, want 403 forbidden on field %q", status, body, field)
		}
	}
}

// snapshot describes every job and queue the store holds, as the wire
// shows them.
func (f *authFixture) snapshot(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b []byte
	p := job.ListParams{Limit: 1000}
	for {
		page, err := f.a.engine.List(ctx, p)
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		b = wire.AppendJobs(b, page.Jobs)
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	qs, err := f.a.engine.Queues(ctx)
	if err != nil {
		t.Fatalf("list queues: %v", err)
	}
	for i := range qs {
		b = fmt.Appendf(b, "\n%+v", toQueueJSON(&qs[i]))
	}
	ss, err := f.a.engine.ListSchedules(ctx)
	if err != nil {
		t.Fatalf("list schedules: %v", err)
	}
	for _, sc := range ss {
		b = fmt.Appendf(b, "\n%+v %s", toScheduleJSON(sc), sc.LastTick)
	}
	return string(b)
}
