package streamserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/stream"
)

// echoBundle is a Server on a loopback port whose handler echoes each
// request, panics on /panic, and words errors as {"kind":…}.
type echoBundle struct {
	srv  *Server
	base string
	ctx  context.Context // ends with the test; each step bounds itself (step)
	// release ends the requests to /hold; a request to /quick/release
	// closes it. Targets under /quick are Inline. held gets a value as
	// each request to /hold begins to wait.
	release chan struct{}
	held    chan struct{}
	// Targets under /batch and /quick/batch are Batchable; batches records
	// the targets of each batch served, and a batch with /batch/panic
	// panics. A batch led by /quick/batch/join stands for a store's
	// commit: it signals joining, waits for joinGo, calls the join of its
	// context (store.WithSyncJoin) from two goroutines at once and
	// records a batch ["joined"].
	// joinable records, for each batch, whether its context had a join.
	mu       sync.Mutex
	batches  [][]string
	joinable []bool
	joining  chan struct{}
	joinGo   chan struct{}
}

// echoAnswer is what the test handler answers.
type echoAnswer struct {
	Method, Target, Auth, Body string
	InStream                   bool
}

func newEchoBundle(t *testing.T, maxBody int64) *echoBundle {
	t.Helper()
	var srv *Server
	b := &echoBundle{release: make(chan struct{}), held: make(chan struct{}, 16),
		joining: make(chan struct{}, 1), joinGo: make(chan struct{})}
	writeError := func(w http.ResponseWriter, _ *http.Request, err error) {
		status := http.StatusInternalServerError
		if e, ok := err.(*Error); ok && e.Kind == FrameTooLarge {
			status = http.StatusRequestEntityTooLarge
		} else if ok && e.Kind == UpgradeRequired {
			status = http.StatusUpgradeRequired
		} else if ok && e.Kind == InvalidRequest {
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == stream.Path {
			srv.Open(w, r)
			return
		}
		if r.URL.Path == "/panic" || r.URL.Path == "/quick/panic" {
			panic("boom")
		}
		if r.URL.Path == "/hold" {
			b.held <- struct{}{}
			<-b.release
		}
		if r.URL.Path == "/quick/release" {
			close(b.release)
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(echoAnswer{Method: r.Method, Target: r.RequestURI, Auth: r.Header.Get("Authorization"),
			Body: string(body), InStream: r.Context().Value(streamKey{}) != nil})
	})
	serveBatch := func(ctx context.Context, rs []*http.Request, ws []http.ResponseWriter) {
		targets := make([]string, len(rs))
		for i, r := range rs {
			targets[i] = r.RequestURI
		}
		join := store.SyncJoin(ctx)
		b.mu.Lock()
		b.batches = append(b.batches, targets)
		b.joinable = append(b.joinable, join != nil)
		b.mu.Unlock()
		if targets[0] == "/quick/batch/join" {
			b.joining <- struct{}{}
			<-b.joinGo
			if join != nil {
				// As the engine may: from two goroutines serving the
				// batch at once, of which one only may read the stream.
				var wg sync.WaitGroup
				wg.Go(join)
				wg.Go(join)
				wg.Wait()
			}
			b.mu.Lock()
			b.batches = append(b.batches, []string{"joined"})
			b.mu.Unlock()
		}
		if slices.Contains(targets, "/batch/panic") {
			panic("boom")
		}
		for i, r := range rs {
			handler.ServeHTTP(ws[i], r)
		}
	}
	srv = New(Options{Handler: handler, WriteError: writeError, MaxBodyBytes: maxBody,
		Logger: slogDiscard(), Inline: func(_, target string) bool { return strings.HasPrefix(target, "/quick") },
		Batchable: func(_, target string) bool {
			return strings.HasPrefix(target, "/batch/") || strings.HasPrefix(target, "/quick/batch/")
		}, ServeBatch: serveBatch})
	b.srv = srv
	hs := httptest.NewServer(handler)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		hs.Close()
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	b.base, b.ctx = hs.URL, ctx
	return b
}

// stepTimeout bounds one step of a test on its own (a dial, a call, a
// wait for one event), never a test's whole run, so that a loaded machine
// makes a test slower rather than failing it.
const stepTimeout = 30 * time.Second

// step returns the context of one step of the test, bounded by
// stepTimeout on its own; cancel it when the step is done.
func (b *echoBundle) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, stepTimeout)
}

// caller is a stream connection or a client.
type caller interface {
	Do(ctx context.Context, method, target string, body []byte) (stream.Answer, error)
}

// do sends one request through c, bounded by stepTimeout.
func (b *echoBundle) do(c caller, method, target string, body []byte) (stream.Answer, error) {
	ctx, cancel := b.step()
	defer cancel()
	return c.Do(ctx, method, target, body)
}

func (b *echoBundle) dial(t *testing.T, authz string) *stream.Conn {
	t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	c, err := stream.Dial(ctx, stream.Config{URL: b.base, Header: http.Header{"Authorization": {authz}}})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Each frame is served by the handler as a request with the upgrade's
// Authorization, marked as coming from a stream; the answer to HEAD has
// no body; a panic is answered as an internal error and the stream goes
// on; a stream cannot be opened inside a stream.
func TestFramesRunThroughTheHandler(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "Bearer x")
	a, err := b.do(c, "POST", "/v1/jobs?x=1", []byte(`{"kind":"k"}`))
	var got echoAnswer
	if err != nil || a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil {
		t.Fatalf("POST frame: %v %d %s", err, a.Status, a.Body)
	}
	if want := (echoAnswer{Method: "POST", Target: "/v1/jobs?x=1", Auth: "Bearer x", Body: `{"kind":"k"}`, InStream: true}); got != want {
		t.Errorf("served %+v, want %+v", got, want)
	}
	if a, err := b.do(c, "HEAD", "/anything", nil); err != nil || a.Status != http.StatusOK || len(a.Body) != 0 {
		t.Errorf("HEAD frame: %v %d %q, want 200 and no body", err, a.Status, a.Body)
	}
	if a, err := b.do(c, "GET", "/panic", nil); err != nil || a.Status != http.StatusInternalServerError || !strings.Contains(string(a.Body), "internal server error") {
		t.Errorf("panicking frame: %v %d %s", err, a.Status, a.Body)
	}
	if a, err := b.do(c, "GET", stream.Path, nil); err != nil || a.Status != http.StatusBadRequest {
		t.Errorf("stream inside a stream: %v %d %s", err, a.Status, a.Body)
	}
	if a, err := b.do(c, "GET", "/after", nil); err != nil || a.Status != http.StatusOK {
		t.Errorf("after the panic: %v %d %s", err, a.Status, a.Body)
	}
}

// A frame that Options.Inline names runs on the stream's reader when it
// is the only request in flight, and is answered as any other: a panic
// too. A frame that Inline does not name, or that comes while another
// request runs, goes to a handler goroutine, so that a request that
// waits does not hold up the ones after it.
func TestLoneFramesRunOnTheReader(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "Bearer x")
	for i := range 20 {
		target := fmt.Sprintf("/quick/%d", i)
		a, err := b.do(c, "POST", target, []byte(`{}`))
		var got echoAnswer
		if err != nil || a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil || got.Target != target {
			t.Fatalf("frame %s: %v %d %s", target, err, a.Status, a.Body)
		}
	}
	if a, err := b.do(c, "POST", "/quick/panic", nil); err != nil || a.Status != http.StatusInternalServerError {
		t.Errorf("panicking inline frame: %v %d %s", err, a.Status, a.Body)
	}
	if n := b.srv.inlined.Load(); n != 21 {
		t.Fatalf("%d frames ran on the reader, want 21", n)
	}
	if a, err := b.do(c, "POST", "/slow", nil); err != nil || a.Status != http.StatusOK {
		t.Errorf("frame not inline: %v %d %s", err, a.Status, a.Body)
	}
	held := make(chan error, 1)
	go func() {
		_, err := b.do(c, "POST", "/hold", nil)
		held <- err
	}()
	// /hold answers only once /quick/release has run: /quick/release
	// must be read and run while /hold waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.srv.mu.Lock()
		running := 0
		for sc := range b.srv.open {
			sc.mu.Lock()
			running += len(sc.inflight)
			sc.mu.Unlock()
		}
		b.srv.mu.Unlock()
		if running == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/hold never started")
		}
		time.Sleep(time.Millisecond)
	}
	if a, err := b.do(c, "POST", "/quick/release", nil); err != nil || a.Status != http.StatusOK {
		t.Fatalf("release: %v %d %s", err, a.Status, a.Body)
	}
	if err := <-held; err != nil {
		t.Fatalf("/hold: %v", err)
	}
	if n := b.srv.inlined.Load(); n != 21 {
		t.Errorf("%d frames ran on the reader, want still 21: /slow is not Inline and /quick/release came while /hold ran", n)
	}
}

// A GET of the stream's path that does not ask to upgrade is refused with
// the Upgrade headers.
func TestOpenNeedsUpgrade(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	resp, err := http.Get(b.base + stream.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != stream.Protocol {
		t.Fatalf("GET without Upgrade: %d, Upgrade %q", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
}

// A frame longer than the body limit and the frame header is answered
// FrameTooLarge, and then the stream closes.
func TestFrameTooLargeClosesTheStream(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 16)
	c := b.dial(t, "")
	a, err := b.do(c, "POST", "/x", []byte(strings.Repeat("y", 17+stream.MaxRequestHeader)))
	if err != nil || a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("long frame: %v %d %s", err, a.Status, a.Body)
	}
	select {
	case <-c.Done():
	case <-time.After(stepTimeout):
		t.Fatal("the stream stayed open after a frame too long")
	}
}

// The caller reading answers for the stream stops when its context ends,
// and another caller waiting takes over: it gets its answer, and the
// answer of the call left is dropped.
func TestACallerLeavingPassesOnTheReading(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "")
	release := sync.OnceFunc(func() { close(b.release) })
	t.Cleanup(release) // before the server closes, on a failure too
	ctx, leave := context.WithCancel(b.ctx)
	left := make(chan error, 1)
	go func() { // alone on the stream: it reads
		_, err := c.Do(ctx, "GET", "/hold", nil)
		left <- err
	}()
	<-b.held
	stays := make(chan error, 1)
	go func() {
		a, err := b.do(c, "GET", "/hold", nil)
		if err == nil && a.Status != http.StatusOK {
			err = fmt.Errorf("status %d", a.Status)
		}
		stays <- err
	}()
	<-b.held
	leave()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call left: %v, want context.Canceled", err)
		}
	case <-time.After(stepTimeout):
		t.Fatal("the call that left did not return")
	}
	release()
	select {
	case err := <-stays:
		if err != nil {
			t.Fatalf("the call that stayed: %v", err)
		}
	case <-time.After(stepTimeout):
		t.Fatal("the call that stayed got no answer: nobody read it")
	}
	if a, err := b.do(c, "GET", "/x", nil); err != nil || a.Status != http.StatusOK {
		t.Fatalf("a later call: %v %d", err, a.Status)
	}
}

// A call made after the server closed an idle stream goes on a new
// stream rather than failing: the caller sees the close before it sends.
func TestACallAfterTheServerClosedAnIdleStream(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 16)
	cl := stream.NewClient(stream.Config{URL: b.base})
	t.Cleanup(cl.Close)
	for i := range 5 {
		// The server answers a frame too long and closes the stream.
		a, err := b.do(cl, "POST", "/x", []byte(strings.Repeat("y", 17+stream.MaxRequestHeader)))
		if err != nil || a.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("long frame: %v %d", err, a.Status)
		}
		time.Sleep(10 * time.Millisecond) // the close arrives; nobody reads yet
		if a, err := b.do(cl, "GET", "/x", nil); err != nil || a.Status != http.StatusOK {
			t.Fatalf("call %d after the close: %v %d", i, err, a.Status)
		}
	}
}

// Close ends the open streams and refuses new ones.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "")
	ctx, cancel := b.step()
	defer cancel()
	if err := b.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(stepTimeout):
		t.Fatal("the stream stayed open after Close")
	}
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", stream.Path, stream.Protocol)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatalf("upgrade after Close: %v %v", resp, err)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A stopping server answers every request it carried out, although the
// client sent more than the server read: closing with request frames
// unread would reset the connection, and a reset makes the client's
// system drop the answers the client has not read yet.
func TestStopAnswersEveryRequestCarriedOut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	done := map[uint32]bool{}
	var srv *Server
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == stream.Path {
			srv.Open(w, r)
			return
		}
		var id uint32
		if _, err := fmt.Sscanf(r.URL.Path, "/r/%d", &id); err != nil {
			t.Errorf("target %s", r.URL.Path)
		}
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		done[id] = true
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	})
	srv = New(Options{Handler: handler, WriteError: func(w http.ResponseWriter, _ *http.Request, err error) {
		w.WriteHeader(http.StatusInternalServerError)
	}, MaxBodyBytes: 1 << 20, Logger: slogDiscard()})
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)

	// A client that sends a burst of frames, more than the server reads
	// before it stops, and reads the answers only once the server is done.
	nc, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", stream.Path, stream.Protocol)
	rd := bufio.NewReader(nc)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	const frames = 3000
	body := []byte(strings.Repeat("x", 2048))
	sent := make(chan error, 1)
	go func() {
		var buf []byte
		for id := range uint32(frames) {
			buf, _ = stream.AppendRequest(buf[:0], stream.Request{ID: id, Method: "POST", Target: fmt.Sprintf("/r/%d", id), Body: body})
			if _, err := nc.Write(buf); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests carried out in 10 s", n)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-sent
	answered := map[uint32]bool{}
	for {
		a, err := stream.ReadAnswer(rd, 1<<20)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Logf("reading answers: %v", err)
			}
			break
		}
		answered[a.ID] = true
	}
	mu.Lock()
	defer mu.Unlock()
	missing := 0
	for id := range done {
		if !answered[id] {
			missing++
		}
	}
	if missing > 0 || len(done) == frames {
		t.Fatalf("%d of the %d requests carried out (of %d sent) got no answer", missing, len(done), frames)
	}
}

// rawStream opens a stream on b without a client: the test writes frames
// and reads answers itself.
func (b *echoBundle) rawStream(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", stream.Path, stream.Protocol)
	rd := bufio.NewReader(nc)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return nc, rd
}

// The single enqueues that arrive while a batch run on the reader commits
// are read and served as a batch of their own inside that batch's sync
// join, so that they share its fsync; the join reads only frames it may
// batch, and offers no join of its own. The frames after the first it may
// not batch are read and served after the batch as usual.
func TestArrivalsJoinTheFsyncOfTheBatchOnTheReader(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	t.Cleanup(func() { // a failure before the join must not hold the close
		select {
		case <-b.joinGo:
		default:
			close(b.joinGo)
		}
	})
	nc, rd := b.rawStream(t)
	var buf []byte
	send := func(first uint32, targets ...string) {
		t.Helper()
		buf = buf[:0]
		for i, target := range targets {
			buf, _ = stream.AppendRequest(buf, stream.Request{ID: first + uint32(i), Method: "POST", Target: target, Body: []byte(`{}`)})
		}
		if _, err := nc.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	send(1, "/quick/batch/join", "/quick/batch/a")
	select {
	case <-b.joining:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not run in 10 s")
	}
	send(3, "/quick/batch/x", "/quick/batch/y", "/quick/solo", "/quick/batch/z")
	time.Sleep(50 * time.Millisecond) // the frames reach the server's socket
	close(b.joinGo)
	want := map[uint32]string{1: "/quick/batch/join", 2: "/quick/batch/a", 3: "/quick/batch/x", 4: "/quick/batch/y", 5: "/quick/solo", 6: "/quick/batch/z"}
	for range want {
		a, err := stream.ReadAnswer(rd, 1<<20)
		var e echoAnswer
		if err != nil || a.Status != http.StatusOK || json.Unmarshal(a.Body, &e) != nil || e.Target != want[a.ID] {
			t.Fatalf("answer %d: %v %d %s, want the echo of %q", a.ID, err, a.Status, a.Body, want[a.ID])
		}
		delete(want, a.ID)
	}
	b.mu.Lock()
	batches, joinable := slices.Clone(b.batches), slices.Clone(b.joinable)
	b.mu.Unlock()
	wantBatches := [][]string{{"/quick/batch/join", "/quick/batch/a"}, {"/quick/batch/x", "/quick/batch/y"}, {"joined"}}
	if !slices.EqualFunc(batches, wantBatches, slices.Equal) {
		t.Fatalf("batches served %q, want %q: x and y inside the join, z after /quick/solo", batches, wantBatches)
	}
	if want := []bool{true, false}; !slices.Equal(joinable, want) {
		t.Fatalf("batches with a join %v, want %v", joinable, want)
	}
}

// Batchable frames that arrive together are served as batches, broken by
// any other frame; every frame gets its own answer, a cancel frame among
// them takes none, and a panicking batch answers each of its frames as
// an internal error while the stream goes on.
func TestFramesThatComeTogetherAreServedAsBatches(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	nc, rd := b.rawStream(t)
	targets := []string{"/batch/a", "/batch/b", "/batch/c", "/other", "/batch/d", stream.MethodCancel, "/batch/e", "/batch/f", "/solo"}
	var buf []byte
	for i, target := range targets {
		r := stream.Request{ID: uint32(i), Method: "POST", Target: target, Body: []byte(`{}`)}
		if target == stream.MethodCancel {
			r = stream.Request{ID: 99, Method: stream.MethodCancel}
		}
		buf, _ = stream.AppendRequest(buf, r)
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	got := map[uint32]string{}
	for len(got) < len(targets)-1 {
		a, err := stream.ReadAnswer(rd, 1<<20)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(got), err)
		}
		var e echoAnswer
		if a.Status != http.StatusOK || json.Unmarshal(a.Body, &e) != nil {
			t.Fatalf("answer %d: %d %s", a.ID, a.Status, a.Body)
		}
		got[a.ID] = e.Target
	}
	for i, target := range targets {
		if target != stream.MethodCancel && got[uint32(i)] != target {
			t.Fatalf("frame %d (%s) answered as %q", i, target, got[uint32(i)])
		}
	}
	b.mu.Lock()
	batches := b.batches
	b.batches = nil
	b.mu.Unlock()
	// The two batches run on goroutines of their own, in either order.
	slices.SortFunc(batches, slices.Compare)
	want := [][]string{{"/batch/a", "/batch/b", "/batch/c"}, {"/batch/d", "/batch/e", "/batch/f"}}
	if !slices.EqualFunc(batches, want, slices.Equal) || b.srv.batched.Load() != 6 {
		t.Fatalf("batches served %q (%d frames), want %q", batches, b.srv.batched.Load(), want)
	}

	buf = buf[:0]
	for i, target := range []string{"/batch/x", "/batch/panic"} {
		buf, _ = stream.AppendRequest(buf, stream.Request{ID: uint32(20 + i), Method: "POST", Target: target})
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		a, err := stream.ReadAnswer(rd, 1<<20)
		if err != nil || a.Status != http.StatusInternalServerError || !strings.Contains(string(a.Body), "internal server error") {
			t.Fatalf("frame of a panicking batch: %v %d %s", err, a.Status, a.Body)
		}
	}
	buf, _ = stream.AppendRequest(buf[:0], stream.Request{ID: 30, Method: "POST", Target: "/after"})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	if a, err := stream.ReadAnswer(rd, 1<<20); err != nil || a.ID != 30 || a.Status != http.StatusOK {
		t.Fatalf("after the panicking batch: %v %d %d %s", err, a.ID, a.Status, a.Body)
	}
}

// A batch of frames that Options.Inline names runs on the stream's reader
// when its frames are the stream's only requests in flight, and each frame
// is answered as any other. A batch that comes while another request runs
// goes to a goroutine of its own.
func TestBatchesRunOnTheReaderWhenAlone(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	t.Cleanup(func() { // a failure before /quick/release must not hold the close
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	nc, rd := b.rawStream(t)
	send := func(first uint32, targets ...string) {
		t.Helper()
		var buf []byte
		for i, target := range targets {
			buf, _ = stream.AppendRequest(buf, stream.Request{ID: first + uint32(i), Method: "POST", Target: target, Body: []byte(`{}`)})
		}
		if _, err := nc.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(want map[uint32]string) {
		t.Helper()
		for range want {
			a, err := stream.ReadAnswer(rd, 1<<20)
			var e echoAnswer
			if err != nil || a.Status != http.StatusOK || json.Unmarshal(a.Body, &e) != nil || e.Target != want[a.ID] {
				t.Fatalf("answer %d: %v %d %s, want the echo of %q", a.ID, err, a.Status, a.Body, want[a.ID])
			}
		}
	}
	send(1, "/quick/batch/a", "/quick/batch/b", "/quick/batch/c")
	receive(map[uint32]string{1: "/quick/batch/a", 2: "/quick/batch/b", 3: "/quick/batch/c"})
	b.mu.Lock()
	batches := slices.Clone(b.batches)
	b.mu.Unlock()
	if want := [][]string{{"/quick/batch/a", "/quick/batch/b", "/quick/batch/c"}}; !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches served %q, want %q", batches, want)
	}
	if n := b.srv.inlined.Load(); n != 3 {
		t.Fatalf("%d frames ran on the reader, want the batch's 3", n)
	}

	send(10, "/hold")
	<-b.held
	send(11, "/quick/batch/x", "/quick/batch/y")
	receive(map[uint32]string{11: "/quick/batch/x", 12: "/quick/batch/y"})
	if n := b.srv.inlined.Load(); n != 3 {
		t.Fatalf("%d frames ran on the reader, want still 3: the batch came while /hold ran", n)
	}
	send(20, "/quick/release")
	receive(map[uint32]string{20: "/quick/release", 10: "/hold"})
}
