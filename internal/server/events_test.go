package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
)

// sse is one server-sent event as read off the wire.
type sse struct {
	id    string
	name  string
	data  obj
	isSet bool
}

// sseReader reads events off a stream.
type sseReader struct {
	t  *testing.T
	rd *bufio.Reader
}

// next returns the next event, skipping comments; ok is false at the end
// of the stream.
func (r *sseReader) next() (ev sse, ok bool) {
	r.t.Helper()
	for {
		line, err := r.rd.ReadString('\n')
		if err != nil {
			return ev, false
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.isSet {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
			ev.isSet = true
		case strings.HasPrefix(line, "event: "):
			ev.name, ev.isSet = line[7:], true
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				r.t.Fatalf("event data %q: %v", line, err)
			}
			ev.isSet = true
		}
	}
}

// openEvents opens GET /v1/events with query and headers; it returns the
// reader and a function that closes the stream.
func (b *bundle) openEvents(query string, header http.Header) (*sseReader, func()) {
	b.t.Helper()
	return openEventStream(b.t, b.base, query, header)
}

// openEventStream opens GET /v1/events of the server at base (http://…)
// with query and headers; it returns the reader and a function that closes
// the stream. The stream is closed after 30 s at the latest, so that a
// test waiting for an event that never comes ends.
func openEventStream(t *testing.T, base, query string, header http.Header) (*sseReader, func()) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/v1/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open events: %d %s", resp.StatusCode, body)
	}
	guard := time.AfterFunc(30*time.Second, func() { resp.Body.Close() })
	return &sseReader{t: t, rd: bufio.NewReader(resp.Body)}, func() { guard.Stop(); resp.Body.Close() }
}

// A reader that disconnects and comes back with Last-Event-ID gets
// exactly the events it missed, in order, and then the live ones.
func TestEventsResumeAfterDisconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rd, closeStream := b.openEvents("queue=mail", nil)
	var first []string
	for range 2 {
		first = append(first, b.enqueue(obj{"queue": "mail", "kind": "send"}))
	}
	b.enqueue(obj{"queue": "other", "kind": "send"}) // filtered out
	var last string
	for i := range 2 {
		ev, ok := rd.next()
		if !ok || ev.name != "job.enqueued" || ev.data["job_id"] != first[i] || ev.data["queue"] != "mail" || ev.data["kind"] != "send" {
			t.Fatalf("event %d: %+v %v", i, ev, ok)
		}
		last = ev.id
	}
	closeStream()

	// Missed while away: an enqueue, a start and a completion.
	missed := b.enqueue(obj{"queue": "mail", "kind": "send"})
	jobs := b.fetch("mail", 1, 0)
	b.must(200, "POST", "/v1/jobs/"+jobs[0]["id"].(string)+"/ack", obj{"token": token(jobs[0])})

	rd, closeStream = b.openEvents("queue=mail", http.Header{"Last-Event-ID": {last}})
	defer closeStream()
	want := []struct{ name, id string }{{"job.enqueued", missed}, {"job.started", first[0]}, {"job.completed", first[0]}}
	for i, w := range want {
		ev, ok := rd.next()
		if !ok || ev.name != w.name || ev.data["job_id"] != w.id {
			t.Fatalf("resumed event %d: %+v, want %s of %s", i, ev, w.name, w.id)
		}
		if ev.id == "" || ev.id == last {
			t.Fatalf("resumed event %d has id %q after %q", i, ev.id, last)
		}
		last = ev.id
	}
	live := b.enqueue(obj{"queue": "mail", "kind": "send"})
	if ev, ok := rd.next(); !ok || ev.name != "job.enqueued" || ev.data["job_id"] != live {
		t.Fatalf("live event after the resume: %+v", ev)
	}
}

// A reader that stops reading is dropped: the server goes on serving
// everyone else at full speed, and the reader learns what it lost. If it
// reads again before the server's write timeout it finds a stream.dropped
// event; else the server has ended the stream. Either way, resuming after
// the last event it got answers stream.gap first.
func TestEventsDropASlowReader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
	rd := &sseReader{t: t, rd: bufio.NewReader(conn)}
	status, err := rd.rd.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("open events: %q %v", status, err)
	}
	// 100,000 events of about 200 bytes: far more than the socket
	// buffers and the server's ring (16,384 events) hold.
	batch := make([]obj, 10_000)
	for i := range batch {
		batch[i] = obj{"queue": "flood", "kind": "k"}
	}
	start := time.Now()
	for range 10 {
		if status, _ := b.call("POST", "/v1/jobs/batch", obj{"jobs": batch}); status != http.StatusOK {
			t.Fatalf("batch enqueue: status %d", status)
		}
	}
	t.Logf("enqueued 100,000 jobs in %v with a stalled reader", time.Since(start))
	// Skip the rest of the head and chunk framing: read lines until the
	// dropped event shows, or the stream ends.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	seen, last, dropped := 0, "", false
	for !dropped {
		line, err := rd.rd.ReadString('\n')
		if err != nil {
			t.Logf("the stream ended after %d events (%v): the reader stalled past the write timeout", seen, err)
			break
		}
		switch {
		case strings.HasPrefix(line, "id: "):
			last = strings.TrimSpace(line[4:])
		case strings.HasPrefix(line, "event: job."):
			seen++
		case strings.HasPrefix(line, "event: stream.dropped"):
			dropped = true
			t.Logf("dropped after %d events, %v after the start", seen, time.Since(start))
		}
	}
	if seen >= 100_000 || last == "" {
		t.Fatalf("the reader got %d events, the last %q; it was never behind", seen, last)
	}
	resumed, closeStream := b.openEvents("", http.Header{"Last-Event-ID": {last}})
	defer closeStream()
	if ev, ok := resumed.next(); !ok || ev.name != "stream.gap" || ev.data["after"] != last {
		t.Fatalf("resume after %q, the last event the dropped reader got: %+v %v, want stream.gap", last, ev, ok)
	}
}

// A token limited to namespaces gets only its queues' events, and may not
// name another's queue.
func TestEventsKeepToTheTokensNamespaces(t *testing.T) {
	t.Parallel()
	const admin, team = "admin-secret-0123456789", "team-secret-0123456789"
	b := setup(t, func(cfg *config.Config) {
		cfg.Auth = true
		cfg.AuthTokens = config.Secret("ops admin * " + admin + "\nteam read-only team- " + team)
	})
	auth := func(secret string) http.Header { return http.Header{"Authorization": {"Bearer " + secret}} }
	if status, _ := b.queenCall(team, "GET", "/v1/events?queue=other", nil); status != http.StatusForbidden {
		t.Fatalf("events of another namespace's queue: %d, want 403", status)
	}
	rd, closeStream := b.openEvents("", auth(team))
	defer closeStream()
	for _, q := range []string{"other", "team-a"} {
		if status, out := b.queenCall(admin, "POST", "/v1/jobs", obj{"queue": q, "kind": "k"}); status != http.StatusCreated {
			t.Fatalf("enqueue: %d %v", status, out)
		}
	}
	if ev, ok := rd.next(); !ok || ev.data["queue"] != "team-a" {
		t.Fatalf("the team's first event: %+v, want team-a's only", ev)
	}
}

// GET /v1/jobs/{id}?wait_ms= answers when the job is final, or as it is
// when the wait ends.
func TestAwaitAJobsResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "calc", "kind": "add"})
	start := time.Now()
	if out := b.must(200, "GET", "/v1/jobs/"+id+"?wait_ms=200", nil); out["state"] != "available" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("a wait that ends: %v after %v", out["state"], time.Since(start))
	}
	done := make(chan obj, 1)
	go func() {
		_, out := b.call("GET", "/v1/jobs/"+id+"?wait_ms=20000", nil)
		done <- out
	}()
	time.Sleep(50 * time.Millisecond) // let the wait begin; a later one returns at once anyway
	jobs := b.fetch("calc", 1, 0)
	b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(jobs[0]), "result": obj{"sum": 3}})
	select {
	case out := <-done:
		if out["state"] != "completed" || out["result"].(obj)["sum"] != 3.0 {
			t.Fatalf("awaited job: %v", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end when the job completed")
	}
	if status, out := b.call("GET", "/v1/jobs/"+id+"?wait_ms=forever", nil); status != 400 || errorCode(out) != "invalid_argument" {
		t.Fatalf("bad wait_ms: %d %v", status, out)
	}
	if status, _ := b.call("GET", "/v1/jobs/missing?wait_ms=100", nil); status != 404 {
		t.Fatalf("await of a missing job: %d", status)
	}
}

// A node serves at most --max-event-readers streams at once: one more is
// refused with 503 unavailable and Retry-After, and a reader that leaves
// frees its place.
func TestEventReadersAreCapped(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]string{"--addr=127.0.0.1:0", "--data=" + t.TempDir(), "--max-event-readers=2"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("load config: %v", err)
	}
	b := start(t, cfg)
	_, closeFirst := b.openEvents("", nil)
	_, closeSecond := b.openEvents("queue=mail", nil)
	defer closeSecond()

	resp, err := http.Get(b.base + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out obj
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(out) != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third reader of two allowed: %d %s (Retry-After %q), want 503 unavailable with Retry-After",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if msg, _ := out["error"].(obj)["message"].(string); !strings.Contains(msg, "max-event-readers") {
		t.Fatalf("the refusal does not say which limit: %q", msg)
	}
	// Bad input is still a 400, whatever the count of readers.
	if status, out := b.call("GET", "/v1/events?after=x", nil); status != http.StatusBadRequest {
		t.Fatalf("a bad resume point at the cap: %d %v, want 400", status, out)
	}

	closeFirst()
	b.waitFor("the place of a reader that left", 10*time.Second, func() bool {
		resp, err := http.Get(b.base + "/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return false
		}
		t.Cleanup(func() { resp.Body.Close() })
		return true
	})
}

// An id of an earlier run of the server is not this run's: a reader that
// resumes with one gets stream.gap, then every event the server keeps; an
// id of this run resumes as before.
func TestEventIDsOfAnEarlierRunAreAGap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rd, closeStream := b.openEvents("", nil)
	for range 5 {
		b.enqueue(obj{"queue": "mail", "kind": "send"})
	}
	var last string
	for range 5 {
		ev, ok := rd.next()
		if !ok || ev.name != "job.enqueued" {
			t.Fatalf("event before the restart: %+v %v", ev, ok)
		}
		last = ev.id
	}
	closeStream()

	b = b.restart()
	var fresh []string
	for range 3 {
		fresh = append(fresh, b.enqueue(obj{"queue": "mail", "kind": "send"}))
	}
	rd, closeStream = b.openEvents("", http.Header{"Last-Event-ID": {last}})
	defer closeStream()
	gap, ok := rd.next()
	if !ok || gap.name != "stream.gap" || gap.data["after"] != last || gap.data["first_id"] == "" {
		t.Fatalf("resume with id %q of the earlier run: first event %+v %v, want stream.gap after it", last, gap, ok)
	}
	var ids []string
	for i, want := range fresh {
		ev, ok := rd.next()
		if !ok || ev.name != "job.enqueued" || ev.data["job_id"] != want {
			t.Fatalf("event %d after the gap: %+v %v, want the enqueue of %s", i, ev, ok, want)
		}
		if i == 0 && ev.id != gap.data["first_id"] {
			t.Fatalf("first event %q, the gap said %v", ev.id, gap.data["first_id"])
		}
		ids = append(ids, ev.id)
	}

	rd, closeStream = b.openEvents("", http.Header{"Last-Event-ID": {ids[0]}})
	defer closeStream()
	for i, want := range fresh[1:] {
		ev, ok := rd.next()
		if !ok || ev.name != "job.enqueued" || ev.data["job_id"] != want || ev.id != ids[i+1] {
			t.Fatalf("resume with an id of this run: event %d %+v %v, want %s's enqueue", i, ev, ok, want)
		}
	}
}
