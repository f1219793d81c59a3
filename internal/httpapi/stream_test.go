package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/stream"
)

// streamBundle is an API on a real store served by a real http.Server on
// a loopback port, reached over HTTP and over streams.
type streamBundle struct {
	t    *testing.T
	a    *API
	base string
	ctx  context.Context // ends with the test; each step bounds itself (step)
}

func newStreamBundle(t *testing.T, opts Options) *streamBundle {
	t.Helper()
	a := newTestAPIWith(t, opts)
	srv := httptest.NewServer(a)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		srv.Close()
		// As the server does: the streams end before the engine closes.
		stopCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := a.CloseStreams(stopCtx); err != nil {
			t.Errorf("close streams: %v", err)
		}
	})
	return &streamBundle{t: t, a: a, base: srv.URL, ctx: ctx}
}

// step returns the context of one dial, request or wait of the test,
// bounded by stepTimeout on its own; cancel it when the step is done.
func (b *streamBundle) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, stepTimeout)
}

// dial opens a stream with the Authorization of token, if any.
func (b *streamBundle) dial(token string) *stream.Conn {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	c, err := stream.Dial(ctx, stream.Config{URL: b.base, Header: bearer(token)})
	if err != nil {
		b.t.Fatalf("open stream: %v", err)
	}
	b.t.Cleanup(c.Close)
	return c
}

func bearer(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// call sends one request over c and fails the test if no answer comes.
func (b *streamBundle) call(c *stream.Conn, method, target, body string) stream.Answer {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	a, err := c.Do(ctx, method, target, []byte(body))
	if err != nil {
		b.t.Fatalf("%s %s over the stream: %v", method, target, err)
	}
	return a
}

// http sends one request over HTTP and returns its status and body.
func (b *streamBundle) http(method, target, body, token string) (int, []byte) {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.base+target, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header = bearer(token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// decode decodes a JSON answer into a map.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

func errCode(t *testing.T, body []byte) string {
	t.Helper()
	e, _ := decode(t, body)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// Jobs enqueued, fetched and acked over a stream are there, in their
// states, over HTTP.
func TestStreamEnqueueFetchAck(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	var ids []string
	for i := 0; i < 3; i++ {
		a := b.call(c, "POST", "/v1/jobs", fmt.Sprintf(`{"queue":"s","kind":"k","payload":{"n":%d}}`, i))
		if a.Status != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", a.Status, a.Body)
		}
		ids = append(ids, decode(t, a.Body)["id"].(string))
	}
	a := b.call(c, "POST", "/v1/fetch", `{"queues":["s"],"max":2}`)
	if a.Status != http.StatusOK {
		t.Fatalf("fetch: %d %s", a.Status, a.Body)
	}
	jobs := decode(t, a.Body)["jobs"].([]any)
	if len(jobs) != 2 {
		t.Fatalf("fetched %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		j := j.(map[string]any)
		token := j["lease"].(map[string]any)["token"].(float64)
		a := b.call(c, "POST", "/v1/jobs/"+j["id"].(string)+"/ack", fmt.Sprintf(`{"token":%d,"result":"ok"}`, int64(token)))
		if a.Status != http.StatusOK || decode(t, a.Body)["state"] != "completed" {
			t.Fatalf("ack: %d %s", a.Status, a.Body)
		}
	}
	states := map[string]int{}
	for _, id := range ids {
		status, body := b.http("GET", "/v1/jobs/"+id, "", "")
		if status != http.StatusOK {
			t.Fatalf("get %s over HTTP: %d %s", id, status, body)
		}
		states[decode(t, body)["state"].(string)]++
	}
	if states["completed"] != 2 || states["available"] != 1 {
		t.Fatalf("states over HTTP: %v", states)
	}
	// A query string reaches the route.
	if a := b.call(c, "GET", "/v1/jobs?queue=s&state=completed", ""); a.Status != http.StatusOK || len(decode(t, a.Body)["jobs"].([]any)) != 2 {
		t.Fatalf("list completed: %d %s", a.Status, a.Body)
	}
}

// An error answered over a stream is byte for byte the HTTP answer.
func TestStreamErrorsMatchHTTP(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	for _, tc := range []struct {
		method, target, body string
		status               int
	}{
		{"POST", "/v1/jobs", `{"kind":`, 400},
		{"POST", "/v1/jobs", `{"kind":"k","bogus":1}`, 400},
		{"POST", "/v1/jobs", `{"queue":"bad queue!","kind":"k"}`, 400},
		{"POST", "/v1/jobs/batch", `{"jobs":[]}`, 400},
		{"GET", "/v1/jobs/missing", "", 404},
		{"POST", "/v1/jobs/missing/ack", `{"token":1}`, 404},
		{"PUT", "/v1/fetch", "", 405},
		{"GET", "/nowhere", "", 404},
	} {
		a := b.call(c, tc.method, tc.target, tc.body)
		status, body := b.http(tc.method, tc.target, tc.body, "")
		if a.Status != tc.status || status != tc.status || !bytes.Equal(a.Body, body) {
			t.Errorf("%s %s %s: stream %d %q, HTTP %d %q, want %d and equal bodies", tc.method, tc.target, tc.body, a.Status, a.Body, status, body, tc.status)
		}
	}
	// What only a frame can get wrong is answered too, and the stream
	// goes on.
	for _, tc := range []struct{ method, target string }{
		{"GET", "v1/jobs"},
		{"GET", ""},
		{"G T", "/v1/jobs"},
		{"GET", stream.Path},
	} {
		if a := b.call(c, tc.method, tc.target, ""); a.Status != http.StatusBadRequest || errCode(t, a.Body) != string(CodeInvalidArgument) {
			t.Errorf("%q %q: %d %s, want 400 invalid_argument", tc.method, tc.target, a.Status, a.Body)
		}
	}
	if a := b.call(c, "GET", "/healthz", ""); a.Status != http.StatusOK {
		t.Fatalf("after the bad frames: %d %s", a.Status, a.Body)
	}
}

// The route answers a request that is not an upgrade with 426 and the
// usual error body.
func TestStreamNeedsUpgrade(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	status, body := b.http("GET", stream.Path, "", "")
	if status != http.StatusUpgradeRequired || errCode(t, body) != string(CodeUpgradeRequired) {
		t.Fatalf("GET %s without Upgrade: %d %s", stream.Path, status, body)
	}
	ctx, cancel := b.step()
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.base+stream.Path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != stream.Protocol {
		t.Fatalf("upgrade to another protocol: %d, Upgrade %q", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
}

// With auth on, opening a stream needs a valid token, and each frame
// needs its route's permission.
func TestStreamAuth(t *testing.T) {
	t.Parallel()
	au, err := auth.New(fixtureTokens())
	if err != nil {
		t.Fatal(err)
	}
	b := newStreamBundle(t, Options{Auth: au})
	for _, token := range []string{"", "not-a-known-token-0123456789"} {
		ctx, cancel := b.step()
		_, err := stream.Dial(ctx, stream.Config{URL: b.base, Header: bearer(token)})
		cancel()
		var refused *stream.UpgradeError
		if !errors.As(err, &refused) || refused.Status != http.StatusUnauthorized || errCode(t, refused.Body) != string(CodeUnauthorized) {
			t.Fatalf("open with token %q: %v", token, err)
		}
	}
	worker := secretOf(auth.RoleWorker, false)
	c := b.dial(worker)
	enqueue := `{"queue":"a","kind":"k"}`
	a := b.call(c, "POST", "/v1/jobs", enqueue)
	status, body := b.http("POST", "/v1/jobs", enqueue, worker)
	if a.Status != http.StatusForbidden || errCode(t, a.Body) != string(CodeForbidden) || status != a.Status || !bytes.Equal(a.Body, body) {
		t.Fatalf("enqueue with a worker token: stream %d %s, HTTP %d %s", a.Status, a.Body, status, body)
	}
	if a := b.call(c, "POST", "/v1/fetch", `{"queues":["a"]}`); a.Status != http.StatusOK {
		t.Fatalf("fetch with a worker token: %d %s", a.Status, a.Body)
	}
	limited := b.dial(secretOf(auth.RoleProducer, true))
	if a := b.call(limited, "POST", "/v1/jobs", enqueue); a.Status != http.StatusForbidden {
		t.Fatalf("enqueue outside the namespace: %d %s", a.Status, a.Body)
	}
	if a := b.call(limited, "POST", "/v1/jobs", `{"queue":"`+nsPrefix+`a","kind":"k"}`); a.Status != http.StatusCreated {
		t.Fatalf("enqueue inside the namespace: %d %s", a.Status, a.Body)
	}
}

// Many goroutines share one stream; every call gets its own answer.
func TestStreamManyConcurrentFrames(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	const goroutines, each = 50, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	ids := make([][]string, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				ctx, cancel := b.step()
				a, err := c.Do(ctx, "POST", "/v1/jobs", []byte(`{"id":"`+id+`","queue":"many","kind":"k"}`))
				cancel()
				if err != nil || a.Status != http.StatusCreated {
					errs <- fmt.Errorf("enqueue %s: %v %d %s", id, err, a.Status, a.Body)
					return
				}
				var got struct{ ID string }
				if err := json.Unmarshal(a.Body, &got); err != nil || got.ID != id {
					errs <- fmt.Errorf("enqueue %s was answered %s", id, a.Body)
					return
				}
				ids[g] = append(ids[g], got.ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	status, body := b.http("GET", "/v1/queues/many", "", "")
	counts, _ := decode(t, body)["counts"].(map[string]any)
	if status != http.StatusOK || counts["available"] != float64(goroutines*each) {
		t.Fatalf("queue after %d enqueues: %d %s", goroutines*each, status, body)
	}
}

// rawStream opens a stream by hand, for frames the codec would not send.
func rawStream(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	return rawStreamAs(t, base, "")
}

// rawStreamAs opens a stream by hand with the bearer token secret, if
// any.
func rawStreamAs(t *testing.T, base, secret string) (net.Conn, *bufio.Reader) {
	t.Helper()
	authz := ""
	if secret != "" {
		authz = "Authorization: Bearer " + secret + "\r\n"
	}
	nc, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", stream.Path, authz, stream.Protocol)
	rd := bufio.NewReader(nc)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return nc, rd
}

// Single enqueues that come together on a stream, and are so served as
// one batch, each get the answer they would get over HTTP: the token's
// namespaces, the body's checks and the engine's apply to each alone, the
// jobs that pass are stored, and each frame is observed under its route.
func TestStreamEnqueuesServedTogetherAnswerAsAlone(t *testing.T) {
	t.Parallel()
	au, err := auth.New(fixtureTokens())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	observed := map[string]int{}
	b := newStreamBundle(t, Options{Auth: au, ObserveRequest: func(route string, status int, _ time.Duration) {
		mu.Lock()
		observed[fmt.Sprintf("%s %d", route, status)]++
		mu.Unlock()
	}})
	secret := secretOf(auth.RoleProducer, true)
	if status, body := b.http("POST", "/v1/jobs", `{"id":"seen","queue":"`+nsPrefix+`a","kind":"k"}`, secret); status != http.StatusCreated {
		t.Fatalf("enqueue over HTTP: %d %s", status, body)
	}
	bodies := []string{
		`{"queue":"` + nsPrefix + `a","kind":"k","priority":7}`,
		`{"queue":"a","kind":"k"}`,
		`{"kind":`,
		`{"queue":"` + nsPrefix + `a","kind":"k","bogus":1}`,
		`{"queue":"` + nsPrefix + `a","kind":""}`,
		`{"id":"seen","queue":"` + nsPrefix + `a","kind":"k"}`,
		`{"queue":"` + nsPrefix + `b","kind":"k2","durability":"process"}`,
		`{"queue":"` + nsPrefix + `a","kind":"k","durability":"memory"}`,
	}
	wantStatus := []int{201, 403, 400, 400, 400, 200, 201, 201}
	nc, rd := rawStreamAs(t, b.base, secret)
	var frames []byte
	for i, body := range bodies {
		frames, _ = stream.AppendRequest(frames, stream.Request{ID: uint32(i), Method: "POST", Target: "/v1/jobs", Body: []byte(body)})
	}
	if _, err := nc.Write(frames); err != nil {
		t.Fatal(err)
	}
	answers := map[uint32]stream.Answer{}
	for len(answers) < len(bodies) {
		a, err := stream.ReadAnswer(rd, 1<<20)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(answers), err)
		}
		answers[a.ID] = a
	}
	if n := b.a.streams.Batched(); n != int64(len(bodies)) {
		t.Fatalf("%d frames served in batches, want all %d", n, len(bodies))
	}
	// Each frame was observed before its answer went out; the HTTP
	// enqueue before them was too.
	mu.Lock()
	want := map[string]int{"POST /v1/jobs 201": 1 + 3, "POST /v1/jobs 200": 1, "POST /v1/jobs 403": 1, "POST /v1/jobs 400": 3}
	if !maps.Equal(observed, want) {
		t.Fatalf("observed %v, want %v", observed, want)
	}
	mu.Unlock()
	for i, body := range bodies {
		a := answers[uint32(i)]
		if a.Status != wantStatus[i] {
			t.Fatalf("frame %d %s: %d %s, want %d", i, body, a.Status, a.Body, wantStatus[i])
		}
		if a.Status >= 400 {
			if status, httpBody := b.http("POST", "/v1/jobs", body, secret); status != a.Status || !bytes.Equal(httpBody, a.Body) {
				t.Fatalf("frame %d %s: %d %s, but over HTTP %d %s", i, body, a.Status, a.Body, status, httpBody)
			}
			continue
		}
		var res struct {
			ID        string
			Duplicate bool
		}
		if err := json.Unmarshal(a.Body, &res); err != nil || res.Duplicate != (a.Status == http.StatusOK) {
			t.Fatalf("frame %d %s: %s", i, body, a.Body)
		}
		var sent map[string]any
		_ = json.Unmarshal([]byte(body), &sent)
		status, stored := b.http("GET", "/v1/jobs/"+res.ID, "", secretOf(auth.RoleAdmin, false))
		got := decode(t, stored)
		if status != http.StatusOK || got["queue"] != sent["queue"] || got["kind"] != sent["kind"] {
			t.Fatalf("frame %d %s: job %s stored as %d %s", i, body, res.ID, status, stored)
		}
	}
}

// A malformed frame closes the connection; a frame too long is answered
// 413 first.
func TestStreamProtocolErrorsCloseTheConnection(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{MaxBodyBytes: 1024})

	nc, rd := rawStream(t, b.base)
	frame, _ := stream.AppendRequest(nil, stream.Request{ID: 1, Method: "GET", Target: "/healthz"})
	frame = append(frame, 0, 0, 0, 3, 0, 0, 0) // a length shorter than a frame's fields
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	if a, err := stream.ReadAnswer(rd, 1<<20); err != nil || a.ID != 1 || a.Status != http.StatusOK {
		t.Fatalf("the frame before the bad one: %+v %v", a, err)
	}
	if _, err := stream.ReadAnswer(rd, 1<<20); err != io.EOF {
		t.Fatalf("after a malformed frame: %v, want the connection closed", err)
	}

	nc, rd = rawStream(t, b.base)
	head := binary.BigEndian.AppendUint32(nil, uint32(1024+stream.MaxRequestHeader+1))
	head = binary.BigEndian.AppendUint32(head, 77)
	if _, err := nc.Write(head); err != nil {
		t.Fatal(err)
	}
	a, err := stream.ReadAnswer(rd, 1<<20)
	if err != nil || a.ID != 77 || a.Status != http.StatusRequestEntityTooLarge || errCode(t, a.Body) != string(CodePayloadTooLarge) {
		t.Fatalf("a frame too long: %+v %v", a, err)
	}
	if _, err := stream.ReadAnswer(rd, 1<<20); err != io.EOF {
		t.Fatalf("after a frame too long: %v, want the connection closed", err)
	}

	// A body over the limit in a frame within it is the route's 413, as
	// over HTTP, and the stream goes on.
	c := b.dial("")
	big := `{"kind":"k","payload":"` + strings.Repeat("x", 2000) + `"}`
	if a := b.call(c, "POST", "/v1/jobs", big); a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d %s", a.Status, a.Body)
	}
	if a := b.call(c, "GET", "/healthz", ""); a.Status != http.StatusOK {
		t.Fatalf("after a body over the limit: %d %s", a.Status, a.Body)
	}
}

// waitFor polls cond until it holds; the engine's parked fetches have no
// signal to wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A long poll holds only its own frame.
func TestStreamLongPollDoesNotBlockOtherFrames(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	polled := make(chan stream.Answer, 1)
	go func() {
		ctx, cancel := b.step()
		defer cancel()
		a, _ := c.Do(ctx, "POST", "/v1/fetch", []byte(`{"queues":["lp"],"wait_ms":10000}`))
		polled <- a
	}()
	waitFor(t, "the fetch to park", func() bool { return b.a.engine.Waiting() == 1 })
	began := time.Now()
	for i := 0; i < 20; i++ {
		if a := b.call(c, "POST", "/v1/jobs", `{"queue":"other","kind":"k"}`); a.Status != http.StatusCreated {
			t.Fatalf("enqueue beside the long poll: %d %s", a.Status, a.Body)
		}
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("20 enqueues beside a long poll took %v", took)
	}
	select {
	case a := <-polled:
		t.Fatalf("the long poll answered early: %d %s", a.Status, a.Body)
	default:
	}
	a := b.call(c, "POST", "/v1/jobs", `{"queue":"lp","kind":"k"}`)
	id := decode(t, a.Body)["id"]
	select {
	case a := <-polled:
		if jobs, _ := decode(t, a.Body)["jobs"].([]any); a.Status != http.StatusOK || len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id {
			t.Fatalf("long poll: %d %s, want job %v", a.Status, a.Body, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not wake for its job")
	}
}

// A call abandoned by its caller is cancelled on the server: a long poll
// ends there, and a job enqueued afterwards is not leased to nobody.
func TestStreamCancelledCallEndsOnTheServer(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	ctx, cancel := b.step()
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, "POST", "/v1/fetch", []byte(`{"queues":["cq"],"wait_ms":30000}`))
		done <- err
	}()
	waitFor(t, "the fetch to park", func() bool { return b.a.engine.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	waitFor(t, "the server to end the fetch", func() bool { return b.a.engine.Waiting() == 0 })
	b.call(c, "POST", "/v1/jobs", `{"queue":"cq","kind":"k"}`)
	a := b.call(c, "POST", "/v1/fetch", `{"queues":["cq"]}`)
	if jobs, _ := decode(t, a.Body)["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("fetch after the cancelled one: %d %s", a.Status, a.Body)
	}
}

// CloseStreams ends the requests in flight, closes the streams and
// refuses new ones.
func TestCloseStreams(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	type result struct {
		a   stream.Answer
		err error
	}
	polled := make(chan result, 1)
	go func() {
		ctx, cancel := b.step()
		defer cancel()
		a, err := c.Do(ctx, "POST", "/v1/fetch", []byte(`{"queues":["z"],"wait_ms":30000}`))
		polled <- result{a, err}
	}()
	waitFor(t, "the fetch to park", func() bool { return b.a.engine.Waiting() == 1 })
	// As the server stops: the engine first, which ends the long polls,
	// then the streams, which let their requests finish.
	b.a.engine.Close()
	ctx, cancel := b.step()
	defer cancel()
	if err := b.a.CloseStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// The fetch ends with what it has, here nothing; or, had the answer
	// been lost, with an error. Never with a job.
	r := <-polled
	noJobs := r.a.Status == http.StatusOK && string(r.a.Body) == "{\"jobs\":[]}\n"
	if r.err == nil && !noJobs {
		t.Fatalf("the long poll in flight: %d %s, want no jobs or an error", r.a.Status, r.a.Body)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open")
	}
	ctx, cancel = b.step()
	defer cancel()
	if _, err := c.Do(ctx, "GET", "/healthz", nil); err == nil {
		t.Fatal("a call on a closed stream succeeded")
	}
	_, err := stream.Dial(ctx, stream.Config{URL: b.base})
	var refused *stream.UpgradeError
	if !errors.As(err, &refused) || refused.Status != http.StatusServiceUnavailable {
		t.Fatalf("open after CloseStreams: %v", err)
	}
}

// Only enqueues run on a stream's reader: never a fetch, which may wait
// for jobs, nor a worker's call on its leases.
func TestWaitsOnlyForStore(t *testing.T) {
	for _, c := range []struct {
		method, target string
		want           bool
	}{
		{"POST", "/v1/jobs", true},
		{"POST", "/v1/jobs/batch", true},
		{"POST", "/v1/jobs/ack", false},
		{"POST", "/v1/jobs/release", false},
		{"POST", "/v1/jobs/01J/ack", false},
		{"POST", "/v1/jobs/01J/fail", false},
		{"POST", "/v1/jobs/01J/extend", false},
		{"POST", "/v1/jobs/01J/release", false},
		{"POST", "/v1/fetch", false},
		{"GET", "/v1/jobs", false},
		{"GET", "/v1/events", false},
		{"POST", "/v1/jobs?x=1", false},
		{"POST", "/v1/queues/q/purge", false},
	} {
		if got := waitsOnlyForStore(c.method, c.target); got != c.want {
			t.Errorf("waitsOnlyForStore(%s %s) = %v, want %v", c.method, c.target, got, c.want)
		}
	}
}
