package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// newEventsAPI returns an API whose engine's bus keeps ring events, served
// over real HTTP.
func newEventsAPI(t *testing.T, ring int) (*API, *httptest.Server) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Config{DecodeJob: DecodeJob, EventRing: ring})
	a := New(e, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		srv.Close()
		e.Close()
		_ = st.Close()
	})
	return a, srv
}

// streamLine reads one line of an event stream, without its new line.
func streamLine(t *testing.T, rd *bufio.Reader) string {
	t.Helper()
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("the stream ended: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

// largestWrite passes an answer's writes through and records the largest.
type largestWrite struct {
	http.ResponseWriter
	largest *atomic.Int64
}

func (w largestWrite) Write(p []byte) (int, error) {
	for {
		old := w.largest.Load()
		if int64(len(p)) <= old || w.largest.CompareAndSwap(old, int64(len(p))) {
			break
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's flush and
// deadlines.
func (w largestWrite) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A reader that resumes from the start of a large backlog of events with
// long errors gets every event, in order, written in bounded pieces: the
// server never builds the backlog in one buffer, and an event keeps only
// the head of a long error.
func TestEventsResumeOverALargeBacklogInBoundedPieces(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	const n = 512
	long := strings.Repeat("e", 64<<10)
	backlog := make([]events.Event, n)
	for i := range backlog {
		backlog[i] = events.Of(events.Dead, time.Now(), fmt.Sprintf("j%d", i), "q")
		backlog[i].Error = long
	}
	a.engine.Events().Publish(backlog)

	var largest atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.ServeHTTP(largestWrite{w, &largest}, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events?after=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("open events: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	got := 0
	for got < n && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Job   string `json:"job_id"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data %.100q: %v", data, err)
		}
		if want := fmt.Sprintf("j%d", got); ev.Job != want {
			t.Fatalf("event %d is of job %s, want %s", got, ev.Job, want)
		}
		if len(ev.Error) > events.MaxErrorBytes || !strings.HasPrefix(long, ev.Error) || ev.Error == "" {
			t.Fatalf("event %d carries %d bytes of its error, want its first %d bytes at most", got, len(ev.Error), events.MaxErrorBytes)
		}
		got++
	}
	if got != n {
		t.Fatalf("read %d of %d events: %v", got, n, sc.Err())
	}
	if l := largest.Load(); l > 256<<10 {
		t.Fatalf("the largest write of the stream was %d bytes; a resume must be written in bounded pieces", l)
	}
	t.Logf("largest write: %d bytes", largest.Load())
}

// A reader that keeps up gets every event, in order, however the events
// come in batches.
func TestEventsAReaderThatKeepsUpLosesNothing(t *testing.T) {
	t.Parallel()
	const n = 5_000
	a, srv := newEventsAPI(t, 2*n) // room for every event: this reader is never overtaken
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events?queue=q", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		for sent, size := 0, 1; sent < n; size = size%50 + 1 {
			batch := make([]events.Event, 0, size)
			for range size {
				if sent < n {
					batch = append(batch, events.Of(events.Enqueued, time.Now(), fmt.Sprint(sent), "q"),
						events.Of(events.Enqueued, time.Now(), "x", "other"))
					sent++
				}
			}
			a.engine.Events().Publish(batch)
		}
	}()
	rd := bufio.NewReader(resp.Body)
	var last events.ID
	for want := 0; want < n; {
		line := streamLine(t, rd)
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			got, err := events.ParseID(id)
			if err != nil || got.Bus != a.engine.Events().Epoch() || got.Seq <= last.Seq {
				t.Fatalf("event id %q after %v: %v", id, last, err)
			}
			last = got
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			ID  string `json:"id"`
			Job string `json:"job_id"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Job != fmt.Sprint(want) || ev.ID != last.String() {
			t.Fatalf("event %d: %s (%v)", want, data, err)
		}
		want++
	}
}

// A reader the ring overtook while it did not read finds a stream.dropped
// event, naming the last event it got, when it reads again; resuming after
// that event answers stream.gap first.
func TestEventsDropAReaderTheRingOvertook(t *testing.T) {
	t.Parallel()
	a, srv := newEventsAPI(t, 1000)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: spool\r\n\r\n")
	rd := bufio.NewReader(conn)
	if status := streamLine(t, rd); !strings.Contains(status, "200") {
		t.Fatalf("open events: %q", status)
	}
	// 40 MB of events, published while the reader reads nothing: more
	// than the socket buffers hold, so the stream stalls far behind a ring
	// of 1,000.
	const n = 10_000
	long := strings.Repeat("e", events.MaxErrorBytes)
	for i := 0; i < n; i += 100 {
		batch := make([]events.Event, 100)
		for k := range batch {
			batch[k] = events.Of(events.Failed, time.Now(), fmt.Sprint(i+k), "q")
			batch[k].Error = long
		}
		a.engine.Events().Publish(batch)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	seen, last := 0, ""
	for {
		line := streamLine(t, rd)
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last = id
			seen++
		}
		if line == "event: stream.dropped" {
			break
		}
	}
	var dropped struct {
		LastID string `json:"last_id"`
	}
	if last == "" { // dropped before it got any: it names the stream's start
		last = events.ID{Bus: a.engine.Events().Epoch()}.String()
	}
	if data, _ := strings.CutPrefix(streamLine(t, rd), "data: "); json.Unmarshal([]byte(data), &dropped) != nil || dropped.LastID != last || seen >= n {
		t.Fatalf("dropped after %d of %d events, the last %q: %+v", seen, n, last, dropped)
	}
	t.Logf("dropped after %d events", seen)
	resp, err := http.Get(srv.URL + "/v1/events?after=" + last)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	resumed := bufio.NewReader(resp.Body)
	if line := streamLine(t, resumed); line != "event: stream.gap" {
		t.Fatalf("resume after the dropped reader's last event: %q, want stream.gap", line)
	}
}
