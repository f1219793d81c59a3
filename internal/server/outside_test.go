package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/stream"
)

// These tests replay, through real HTTP, what a hostile or unlucky user
// tried from outside: one id naming two jobs, enqueues that told of other
// namespaces' jobs, text the stores kept differently, late acks of memory
// jobs, surrogate escapes that collided, and answers that were not the
// catalog's JSON.

// stores are the two kinds of store every test here runs on, each giving
// the config changes of a server over it. A subtest asks for its own, so
// that without PostgreSQL only the subtest over PostgreSQL skips.
func stores() map[string]func(*testing.T) []func(*config.Config) {
	return map[string]func(*testing.T) []func(*config.Config){
		"sqlite": func(*testing.T) []func(*config.Config) { return nil },
		"postgres": func(t *testing.T) []func(*config.Config) {
			return []func(*config.Config){onPostgres(pgtest.Schema(t))}
		},
	}
}

// callAs sends a request with a bearer token (none when empty) and
// returns the status and the raw body.
func (b *bundle) callAs(token, method, path, body string) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// wantError fails unless an answer is the catalog's JSON error with
// status, code and field.
func wantError(t *testing.T, what string, status int, body []byte, wantStatus int, code, field string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message, Field string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || status != wantStatus || e.Error.Code != code || e.Error.Field != field {
		t.Fatalf("%s: %d %s; want %d %s on field %q", what, status, body, wantStatus, code, field)
	}
}

// An id names one job across queues and durability levels: an enqueue of
// a known id into its queue at another level is a duplicate of that job,
// one into another queue is 409 id_taken and stores nothing, and only the
// one job's current token acks it.
func TestOneIDOneJobAcrossTiers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct{ first, second string }{{"full", "memory"}, {"memory", "full"}, {"process", "memory"}} {
		id := "X-" + c.first + "-" + c.second
		status, out := b.call("POST", "/v1/jobs", obj{"id": id, "queue": "qa", "kind": "k", "durability": c.first})
		if status != 201 {
			t.Fatalf("%s: first enqueue %d %v", id, status, out)
		}
		status, out = b.call("POST", "/v1/jobs", obj{"id": id, "queue": "qa", "kind": "k", "durability": c.second})
		if status != 200 || out["duplicate"] != true || out["state"] != "available" {
			t.Fatalf("%s: same id, same queue, %s: %d %v; want 200 duplicate", id, c.second, status, out)
		}
		code, body := b.callAs("", "POST", "/v1/jobs", fmt.Sprintf(`{"id":%q,"queue":"qb","kind":"k","durability":%q}`, id, c.second))
		wantError(t, id+": same id in another queue", code, body, 409, "id_taken", "id")
		code, body = b.callAs("", "POST", "/v1/jobs/batch", fmt.Sprintf(`{"jobs":[{"queue":"qb","kind":"k","durability":%[2]q},{"id":%[1]q,"queue":"qb","kind":"k","durability":%[2]q}]}`, id, c.second))
		wantError(t, id+": batch with the id in another queue", code, body, 409, "id_taken", "jobs[1].id")
		if code, body := b.callAs("", "GET", "/v1/queues/qb", ""); code != 404 {
			t.Fatalf("%s: refused enqueues made queue qb: %d %s", id, code, body)
		}
		if got := b.get(id); got["durability"] != c.first {
			t.Fatalf("%s: job is %v, want the %s one", id, got["durability"], c.first)
		}
		jobs := b.fetch("qa", 10, 0)
		if len(jobs) != 1 || jobs[0]["id"] != id {
			t.Fatalf("%s: fetch handed out %v, want the one job", id, jobs)
		}
		b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(jobs[0]), "result": "from-A"})
		if again := b.fetch("qa", 10, 0); len(again) != 0 {
			t.Fatalf("%s: a second job was handed out: %v", id, again)
		}
	}
}

// A producer limited to its namespace learns nothing of another
// namespace's job from an enqueue of its id: the answer is the same 409,
// byte for byte, whatever that job's state, in the single and the batch
// form, and the same as for an id of its own namespace's other queue.
func TestEnqueueOfAForeignIDTellsNothing(t *testing.T) {
	t.Parallel()
	const admin, producer, worker = "admin-secret-0123456789", "billing-secret-0123456789", "hr-worker-secret-012345"
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			b := setup(t, append(change, func(c *config.Config) {
				c.Auth = true
				c.AuthTokens = "ops admin * " + admin + "\nbilling producer billing. " + producer + "\nhr worker hr " + worker
			})...)
			if code, body := b.callAs(admin, "POST", "/v1/jobs", `{"id":"secret-42","queue":"hr","kind":"k"}`); code != 201 {
				t.Fatalf("enqueue the secret job: %d %s", code, body)
			}
			if code, body := b.callAs(admin, "POST", "/v1/jobs", `{"id":"mine-1","queue":"billing.y","kind":"k"}`); code != 201 {
				t.Fatalf("enqueue: %d %s", code, body)
			}
			single := func(id string) string {
				code, body := b.callAs(producer, "POST", "/v1/jobs", fmt.Sprintf(`{"id":%q,"queue":"billing.x","kind":"k"}`, id))
				wantError(t, "enqueue of "+id, code, body, 409, "id_taken", "id")
				return strings.ReplaceAll(string(body), id, "ID")
			}
			batch := func(id string) string {
				code, body := b.callAs(producer, "POST", "/v1/jobs/batch", fmt.Sprintf(`{"jobs":[{"queue":"billing.x","kind":"k"},{"id":%q,"queue":"billing.x","kind":"k"}]}`, id))
				wantError(t, "batch enqueue of "+id, code, body, 409, "id_taken", "jobs[1].id")
				return strings.ReplaceAll(string(body), id, "ID")
			}
			first, firstBatch := single("secret-42"), batch("secret-42")
			for _, leak := range []string{"hr", "available", "state", "duplicate"} {
				if strings.Contains(first, leak) || strings.Contains(firstBatch, leak) {
					t.Fatalf("the answer tells %q: %s %s", leak, first, firstBatch)
				}
			}
			if own := single("mine-1"); own != first {
				t.Fatalf("a foreign id is answered %s, an id of the token's other queue %s", first, own)
			}
			// The secret job moves on: active, then completed. The answers
			// do not move with it.
			code, body := b.callAs(worker, "POST", "/v1/fetch", `{"queues":["hr"]}`)
			var fetched struct {
				Jobs []struct {
					ID    string
					Lease struct{ Token int64 }
				}
			}
			if err := json.Unmarshal(body, &fetched); err != nil || code != 200 || len(fetched.Jobs) != 1 {
				t.Fatalf("fetch the secret job: %d %s", code, body)
			}
			if s, bt := single("secret-42"), batch("secret-42"); s != first || bt != firstBatch {
				t.Fatalf("answers changed when the job became active: %s %s", s, bt)
			}
			if code, body := b.callAs(worker, "POST", "/v1/jobs/secret-42/ack", fmt.Sprintf(`{"token":%d}`, fetched.Jobs[0].Lease.Token)); code != 200 {
				t.Fatalf("ack the secret job: %d %s", code, body)
			}
			if s, bt := single("secret-42"), batch("secret-42"); s != first || bt != firstBatch {
				t.Fatalf("answers changed when the job completed: %s %s", s, bt)
			}
			if code, body := b.callAs(producer, "GET", "/v1/queues/billing.x", ""); code != 404 {
				t.Fatalf("refused enqueues created queue billing.x: %d %s", code, body)
			}
		})
	}
}

// A NUL in a unique key is refused on both stores, single and in a batch,
// naming the field; a NUL in a failed attempt's error is kept as U+FFFD on
// both.
func TestNULIsTreatedAlikeOnBothStores(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			b := setup(t, change...)
			code, body := b.callAs("", "POST", "/v1/jobs", `{"queue":"u","kind":"k","unique_key":"a\u0000b"}`)
			wantError(t, "NUL in a unique key", code, body, 400, "invalid_argument", "unique_key")
			code, body = b.callAs("", "POST", "/v1/jobs/batch", `{"jobs":[{"queue":"u","kind":"k"},{"queue":"u","kind":"k","unique_key":"a\u0000b"}]}`)
			wantError(t, "NUL in a batch's unique key", code, body, 400, "invalid_argument", "jobs[1].unique_key")
			if code, _ := b.callAs("", "GET", "/v1/queues/u", ""); code != 404 {
				t.Fatalf("refused enqueues created queue u: %d", code)
			}
			id := b.enqueue(obj{"queue": "u", "kind": "k", "max_attempts": 1})
			jobs := b.fetch("u", 1, 0)
			b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(jobs[0]), "error": "bad\x00byte"})
			errs := b.get(id)["errors"].([]any)
			if msg := errs[0].(obj)["message"]; msg != "bad\uFFFDbyte" {
				t.Fatalf("error kept as %q, want %q", msg, "bad\uFFFDbyte")
			}
		})
	}
}

// A memory job acked twice with its token answers 409 lease_lost the
// second time, as a durable job does, single and in a batch; so does
// an ack of a memory job handed out again after its lease ran out.
func TestLateAckOfAMemoryJobIsLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, d := range []string{"memory", "full"} {
		id := b.enqueue(obj{"queue": "late-" + d, "kind": "k", "durability": d})
		jobs := b.fetch("late-"+d, 1, 0)
		tok := token(jobs[0])
		b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": tok})
		code, body := b.callAs("", "POST", "/v1/jobs/"+id+"/ack", fmt.Sprintf(`{"token":%d}`, int64(tok)))
		wantError(t, d+" job acked twice", code, body, 409, "lease_lost", "")
		out := b.must(200, "POST", "/v1/jobs/ack", obj{"items": []obj{{"id": id, "token": tok}}})
		item := objs(out["results"])[0]
		if errorCode(item) != "lease_lost" {
			t.Fatalf("%s job acked twice in a batch: %v, want a lease_lost item", d, item)
		}
		if got := b.get(id); got["state"] != "completed" {
			t.Fatalf("%s job after late acks: %v", d, got["state"])
		}
	}
}

// Two unique keys that differ only in which half of a UTF-16 surrogate
// pair they escape are refused, not merged into one; whole pairs are kept
// apart.
func TestSurrogateEscapesInKeysAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, key := range []string{`\ud800`, `\udfff`, `x\ud800\u0041`} {
		code, body := b.callAs("", "POST", "/v1/jobs", `{"queue":"s","kind":"k","unique_key":"`+key+`"}`)
		wantError(t, "unique key "+key, code, body, 400, "invalid_argument", "unique_key")
		code, body = b.callAs("", "POST", "/v1/jobs/batch", `{"jobs":[{"queue":"s","kind":"k"},{"queue":"s","kind":"k","unique_key":"`+key+`"}]}`)
		wantError(t, "batch unique key "+key, code, body, 400, "invalid_argument", "jobs[1].unique_key")
	}
	for _, key := range []string{`\ud83d\ude00`, `\ud83d\ude01`} {
		code, body := b.callAs("", "POST", "/v1/jobs", `{"queue":"s","kind":"k","unique_key":"`+key+`"}`)
		if code != 201 {
			t.Fatalf("unique key %s: %d %s, want a new job", key, code, body)
		}
	}
}

// rawAnswer sends raw bytes on a new connection and reads one answer.
func rawAnswer(t *testing.T, addr string, request []byte) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = c.Write(request) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %.60q: %v", request, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the body of the answer to %.60q: %v", request, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

// Every answer the server writes itself is the catalog's JSON error: a
// path not in canonical form is 404 (never a redirect), over HTTP and in
// stream frames; huge headers, a malformed URI, "GET *", HTTP/0.9 and an
// unsupported transfer coding get JSON 431 or 400; the answer to a HEAD
// frame has no body.
func TestServerAnswersAreCatalogJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "p", "kind": "k"})
	addr := b.srv.Addr()
	huge := "GET /v1/jobs/" + id + " HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n"
	for _, c := range []struct {
		what    string
		request string
		status  int
		code    string
	}{
		{"double slash", "GET //v1/jobs/" + id + " HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "not_found"},
		{"dot segment", "GET /v1/./jobs/" + id + " HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "not_found"},
		{"dot-dot segment", "GET /v1/../v1/jobs/" + id + " HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "not_found"},
		{"headers of 2 MB", huge, 431, "headers_too_large"},
		{"bad escape", "GET /v1/jobs/%ZZ HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request"},
		{"asterisk", "GET * HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request"},
		{"HTTP/0.9", "GET /v1/jobs/" + id + "\r\n\r\n", 400, "bad_request"},
		{"unknown transfer coding", "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400, "bad_request"},
		{"unsupported Expect", "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 400, "bad_request"},
	} {
		resp := rawAnswer(t, addr, []byte(c.request))
		body, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q, body %q", c.what, ct, body)
			continue
		}
		wantError(t, c.what, resp.StatusCode, body, c.status, c.code, "")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sc, err := stream.Dial(ctx, stream.Config{URL: b.base})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, target := range []string{"//v1/jobs/" + id, "/v1/./jobs/" + id, "/v1/../v1/jobs/" + id} {
		a, err := sc.Do(ctx, "GET", target, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, "stream frame for "+target, a.Status, a.Body, 404, "not_found", "")
	}
	a, err := sc.Do(ctx, "HEAD", "/v1/jobs/"+id, nil)
	if err != nil || a.Status != 200 || len(a.Body) != 0 {
		t.Fatalf("stream HEAD frame: %v %d %q, want 200 and no body", err, a.Status, a.Body)
	}
	if a, err := sc.Do(ctx, "GET", "/v1/jobs/"+id, nil); err != nil || a.Status != 200 {
		t.Fatalf("stream GET frame after them: %v %d %s", err, a.Status, a.Body)
	}
}
