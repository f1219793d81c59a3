package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
)

// The fuzz targets send arbitrary requests through the real handler on a
// real store and check every answer against the contract: no panic, no
// 5xx, a JSON error body with a catalog code and its status for every
// 4xx, and a 2xx only for a request the protocol allows (spec_test.go).
// Where the answer does not depend on stored state, the reverse holds too:
// an allowed request is served. Seed inputs live in testdata/fuzz/<target>,
// as do the crashers found so far. Run one with
//
//	go test ./internal/httpapi -run '^$' -fuzz '^FuzzEnqueue$' -fuzztime 60s

const (
	// fuzzJob is an active job the lease routes can name. Inputs of the
	// lease targets may write its token as fuzzTokenMark.
	fuzzJob       = "fuzz-job"
	fuzzTokenMark = "$TOKEN"
	fuzzQueue     = "fuzzq"
	// fuzzMaxCompared bounds the bodies whose answer is compared with the
	// spec: larger ones may hit the payload limit, which the spec leaves
	// out.
	fuzzMaxCompared = 512 << 10
)

// fuzzHarness is one API on a real store, shared by the iterations of a
// fuzz target in one process.
type fuzzHarness struct {
	a *API
	// token is fuzzJob's lease token in decimal.
	token []byte
}

func newFuzzHarness(f *testing.F) *fuzzHarness {
	f.Helper()
	a := newTestAPI(f)
	ctx := context.Background()
	if _, err := a.engine.Enqueue(ctx, engine.EnqueueRequest{ID: fuzzJob, Queue: fuzzQueue, Kind: "k"}); err != nil {
		f.Fatal(err)
	}
	jobs, err := a.engine.Fetch(ctx, engine.FetchRequest{Queues: []string{fuzzQueue}})
	if err != nil || len(jobs) != 1 {
		f.Fatalf("lease the fuzz job: %d jobs, %v", len(jobs), err)
	}
	return &fuzzHarness{a: a, token: strconv.AppendInt(nil, jobs[0].LeaseToken, 10)}
}

// serve sends one request, bounded by timeout when it is not zero, and
// checks the answer against the contract. expired reports that the
// harness's own deadline ended the call, whose answer then proves nothing
// about the input.
func (h *fuzzHarness) serve(t *testing.T, req *http.Request, timeout time.Duration) (rec *httptest.ResponseRecorder, expired bool) {
	t.Helper()
	ctx := req.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		req = req.WithContext(ctx)
	}
	rec = httptest.NewRecorder()
	h.a.ServeHTTP(rec, req)
	expired = ctx.Err() != nil
	checkAnswer(t, rec, expired)
	return rec, expired
}

func (h *fuzzHarness) post(t *testing.T, target string, body []byte, timeout time.Duration) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	return h.serve(t, httptest.NewRequest("POST", target, bytes.NewReader(body)), timeout)
}

// checkAnswer fails the test unless rec keeps the contract of every
// answer. A 503 is allowed when the harness's deadline expired.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, expired bool) {
	t.Helper()
	switch {
	case rec.Code >= 300 && rec.Code < 400:
		if rec.Header().Get("Location") == "" {
			t.Fatalf("redirect %d without a Location", rec.Code)
		}
		return
	case rec.Code == http.StatusNoContent:
		if rec.Body.Len() != 0 {
			t.Fatalf("204 with a body: %q", rec.Body)
		}
		return
	case rec.Code >= 500 && !(expired && rec.Code == http.StatusServiceUnavailable):
		t.Fatalf("server error %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("answer %d has Content-Type %q: %q", rec.Code, ct, rec.Body)
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	var body struct {
		Error *struct {
			Code    Code   `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil {
		t.Fatalf("answer %d is not an error body: %q (%v)", rec.Code, rec.Body, err)
	}
	if status, ok := Catalog[body.Error.Code]; !ok || status != rec.Code {
		t.Fatalf("answer %d has code %q, whose status is %d", rec.Code, body.Error.Code, status)
	}
	if body.Error.Message == "" {
		t.Fatalf("error %s without a message", body.Error.Code)
	}
}

// compare fails the test when the server's verdict differs from the
// spec's. When both ways is false, only a 2xx for an input the spec
// refuses is a failure (the answer to an allowed input depends on state).
func compare(t *testing.T, rec *httptest.ResponseRecorder, allowed, bothWays bool, body []byte) {
	t.Helper()
	served := rec.Code >= 200 && rec.Code < 300
	if served && !allowed {
		t.Fatalf("served %d, but the protocol refuses the request %q: %s", rec.Code, body, rec.Body)
	}
	if bothWays && allowed && !served {
		t.Fatalf("refused %d, but the protocol allows the request %q: %s", rec.Code, body, rec.Body)
	}
}

func FuzzEnqueue(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add([]byte(`{"queue":"emails","kind":"send","payload":{"user":42}}`))
	f.Add([]byte(`{"kind":"send","durability":"memory"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		now := time.Now()
		rec, _ := h.post(t, "/v1/jobs", body, 0)
		if len(body) <= fuzzMaxCompared {
			compare(t, rec, specEnqueue(body, now), true, body)
		}
	})
}

func FuzzEnqueueBatch(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add([]byte(`{"jobs":[{"kind":"a"},{"queue":"q","kind":"b","priority":5}]}`))
	f.Add([]byte(`{"jobs":[{"kind":"a","durability":"memory"},{"kind":"b","durability":"full"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		now := time.Now()
		rec, _ := h.post(t, "/v1/jobs/batch", body, 0)
		if len(body) <= fuzzMaxCompared {
			compare(t, rec, specEnqueueBatch(body, now), true, body)
		}
	})
}

func FuzzFetch(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add([]byte(`{"queues":["fuzzq","other"],"max":10,"wait_ms":5,"lease_ms":1000,"worker":"w"}`))
	f.Add([]byte(`{"queues":["fuzzq"],"group":"tenant-42","wait_ms":5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		// A long poll would hold every iteration for up to a minute.
		rec, expired := h.post(t, "/v1/fetch", body, 50*time.Millisecond)
		if !expired {
			compare(t, rec, specFetch(body), true, body)
		}
	})
}

var fuzzLeaseOps = []string{"ack", "fail", "extend", "release", "progress"}

func FuzzLeaseOne(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add(uint8(2), []byte(`{"token":$TOKEN,"lease_ms":1000}`))
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		body = bytes.ReplaceAll(body, []byte(fuzzTokenMark), h.token)
		name := fuzzLeaseOps[int(op)%len(fuzzLeaseOps)]
		rec, _ := h.post(t, "/v1/jobs/"+fuzzJob+"/"+name, body, 0)
		compare(t, rec, specLeaseOne(name, body, fuzzJob), false, body)
	})
}

func FuzzLeaseBatch(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add(uint8(2), []byte(`{"items":[{"id":"fuzz-job","token":$TOKEN,"lease_ms":1000}]}`))
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		body = bytes.ReplaceAll(body, []byte(fuzzTokenMark), h.token)
		name := fuzzLeaseOps[int(op)%4] // progress has no batch form
		rec, _ := h.post(t, "/v1/jobs/"+name, body, 0)
		if len(body) <= fuzzMaxCompared {
			compare(t, rec, specLeaseBatch(name, body), true, body)
		}
	})
}

// FuzzTransaction compares only one way: whether a transaction is served
// depends on the fuzz job's lease, which the first served ack ends.
func FuzzTransaction(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add([]byte(`{"ack":[{"id":"fuzz-job","token":$TOKEN,"result":1}],"enqueue":[{"queue":"q","kind":"k"}]}`))
	f.Add([]byte(`{"fail":[{"id":"fuzz-job","token":$TOKEN,"error":"x","retry_after_ms":10}],"enqueue":[{"kind":"k","durability":"memory"}]}`))
	f.Add([]byte(`{"enqueue":[{"kind":"k","durability":"memory"},{"kind":"k","durability":"memory"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.ReplaceAll(body, []byte(fuzzTokenMark), h.token)
		now := time.Now()
		rec, _ := h.post(t, "/v1/transactions", body, 0)
		if len(body) <= fuzzMaxCompared {
			compare(t, rec, specTransaction(body, now), false, body)
		}
	})
}

func FuzzQueueBulk(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add(true, []byte(`{"state":"dead"}`))
	f.Fuzz(func(t *testing.T, retry bool, body []byte) {
		target := "/v1/queues/" + fuzzQueue + "/delete"
		if retry {
			target = "/v1/queues/" + fuzzQueue + "/retry"
		}
		rec, _ := h.post(t, target, body, 0)
		compare(t, rec, specBulk(body, retry), true, body)
	})
}

func FuzzQueueDurability(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add([]byte(`{"durability":"process"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, _ := h.post(t, "/v1/queues/"+fuzzQueue+"/durability", body, 0)
		compare(t, rec, specQueueDurability(body), true, body)
	})
}

// fuzzEmptyRoutes take no body (or {}).
var fuzzEmptyRoutes = []string{
	"/v1/jobs/" + fuzzJob + "/cancel",
	"/v1/jobs/" + fuzzJob + "/retry",
	"/v1/queues/" + fuzzQueue + "/pause",
	"/v1/queues/" + fuzzQueue + "/resume",
	"/v1/queues/" + fuzzQueue + "/purge",
}

func FuzzEmptyBody(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add(uint8(2), []byte(` {} `))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rec, _ := h.post(t, fuzzEmptyRoutes[int(route)%len(fuzzEmptyRoutes)], body, 0)
		compare(t, rec, specEmpty(body), false, body)
		if specEmpty(body) && (rec.Code == http.StatusBadRequest || rec.Code == http.StatusRequestEntityTooLarge) {
			t.Fatalf("an empty body was refused: %d %s", rec.Code, rec.Body)
		}
	})
}

func FuzzListJobs(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add("queue=fuzzq&state=active&limit=5")
	f.Add("state=active&worker=w-1")
	f.Add("worker=w-1")
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/v1/jobs", nil)
		req.URL.RawQuery = query
		rec, _ := h.serve(t, req, 0)
		q := req.URL.Query()
		if q.Get("cursor") != "" {
			compare(t, rec, specList(q), false, []byte(query)) // a cursor may be stale or forged
			return
		}
		compare(t, rec, specList(q), true, []byte(query))
	})
}

// specList reports whether q is a valid query of GET /v1/jobs.
func specList(q url.Values) bool {
	if vs, ok := q["queue"]; ok && !specName.MatchString(vs[0]) {
		return false
	}
	if vs, ok := q["state"]; ok && !job.State(vs[0]).Valid() {
		return false
	}
	if vs, ok := q["limit"]; ok {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > 1000 {
			return false
		}
	}
	if vs, ok := q["worker"]; ok && (len(vs[0]) < 1 || len(vs[0]) > 256 || q.Get("state") != "active") {
		return false
	}
	return true
}

// FuzzRoute sends bodiless requests to arbitrary methods and paths: the
// router must answer each within the contract.
func FuzzRoute(f *testing.F) {
	h := newFuzzHarness(f)
	f.Add("GET", "/v1/jobs/"+fuzzJob)
	f.Fuzz(func(t *testing.T, method, target string) {
		if _, err := http.NewRequest(method, "http://spool/", nil); err != nil {
			return // not a method a server would read
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") {
			return
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.Method, req.URL, req.RequestURI = method, u, target
		h.serve(t, req, 50*time.Millisecond)
	})
}
