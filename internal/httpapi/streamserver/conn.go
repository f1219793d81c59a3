package streamserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/stream"
)

// MaxInFlight bounds the requests of one stream in flight at once: read
// and not yet answered. When it is reached the server stops reading the
// stream's frames until an answer is written, which pushes back on the
// client through TCP.
const MaxInFlight = 1024

// streamBufferSize is the size of a stream's read and write buffers, so
// that many frames share one system call.
const streamBufferSize = 64 << 10

// streamWriteTimeout bounds each flush of a stream's answers: a client
// that stops reading them loses its stream rather than holding it.
const streamWriteTimeout = 2 * time.Minute

// conn is the server side of one stream: a reader that hands each request
// frame to a handler goroutine of its own, which runs the API's own
// handler on a request made from the frame, and a writer that writes
// their answers, flushing when no more are queued.
type conn struct {
	srv    *Server
	nc     net.Conn
	rd     *bufio.Reader
	limit  int64    // the longest request frame allowed
	auth   []string // the upgrade's Authorization header
	host   string   // the upgrade's Host
	remote string   // the upgrade's remote address
	ctx    context.Context
	cancel context.CancelFunc
	// join is joinArrivals as a function value, made once; joinCtx is
	// ctx with join as its store.WithSyncJoin.
	join    func()
	joinCtx context.Context
	// joinOpen is set while the reader waits for a batch or a lone frame
	// that may call joinArrivals; the first call takes it. The store may
	// call a request's join from any goroutine serving it (the engine
	// inserts some jobs of a batch alongside), but the reader waits for
	// all of them, so the one call that takes joinOpen reads the stream
	// alone.
	joinOpen atomic.Bool

	slots   chan struct{} // one per request in flight: the bound
	work    chan frameJob // requests for an idle handler goroutine
	read    chan struct{} // closed when no frame is read any more: idle handlers end
	stopped chan struct{} // closed by stop
	stopOne sync.Once
	answers chan stream.Answer // answers to write; never full (see readLoop)
	done    chan struct{}      // closed when the stream has ended

	// wmu is held by whoever writes answers to w: the writer's goroutine
	// or the reader's (handleInline). broken is set once a write failed.
	wmu    sync.Mutex
	w      *bufio.Writer
	broken bool

	// headers are the header of the stream's requests without a body and
	// with one: the upgrade's Authorization, and for a body its
	// Content-Type. The requests share them, read-only (Options.Handler).
	headers [2]http.Header
	tmu     sync.Mutex
	targets map[string]*url.URL // guarded by tmu

	handlers sync.WaitGroup // the handler goroutines
	mu       sync.Mutex
	inflight map[uint32]context.CancelFunc // requests running, by id
}

// newConn returns the stream of the upgraded connection nc, whose buffered
// reader rd may hold the first frames already, for the upgrade request r.
func newConn(srv *Server, nc net.Conn, rd *bufio.Reader, r *http.Request) *conn {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), streamKey{}, true))
	c := &conn{
		srv: srv, nc: nc,
		rd:    bufio.NewReaderSize(rd, streamBufferSize), // takes over what rd holds
		limit: srv.opts.MaxBodyBytes + stream.MaxRequestHeader,
		auth:  r.Header.Values("Authorization"), host: r.Host, remote: r.RemoteAddr,
		ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, MaxInFlight),
		work:  make(chan frameJob),
		read:  make(chan struct{}), stopped: make(chan struct{}),
		// Each answer holds a slot until written, and a refused frame
		// one more answer, so sends never block.
		answers:  make(chan stream.Answer, MaxInFlight+1),
		done:     make(chan struct{}),
		inflight: make(map[uint32]context.CancelFunc),
		targets:  make(map[string]*url.URL),
		w:        bufio.NewWriterSize(nc, streamBufferSize),
	}
	c.join = c.joinArrivals
	c.joinCtx = store.WithSyncJoin(ctx, c.join)
	for i := range c.headers {
		h := http.Header{}
		if len(c.auth) > 0 {
			h["Authorization"] = c.auth
		}
		if i == 1 {
			h["Content-Type"] = jsonContentType
		}
		c.headers[i] = h
	}
	return c
}

// serve runs the stream until the client closes it, breaks the protocol,
// or stop is called. When the client left or broke the protocol, it
// cancels the requests in flight; after stop, it lets them finish, as an
// HTTP server shutting down lets its requests finish, so that a call the
// server carried out is answered. It then writes the answers (while the
// connection takes them) and closes the connection.
func (s *conn) serve() {
	defer close(s.done)
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.writeLoop()
	}()
	if err := s.readLoop(); err != nil {
		s.srv.opts.Logger.Warn("stream closed for a protocol error", "remote", s.remote, "err", err)
	}
	close(s.read)
	select {
	case <-s.stopped:
	default:
		s.cancel() // nobody is left to answer, or the stream is broken
	}
	s.handlers.Wait()
	s.cancel()
	close(s.answers)
	<-written
	s.closeGently()
}

// lingerTimeout bounds how long a closing stream waits for its client to
// close after the last answer.
const lingerTimeout = 500 * time.Millisecond

// closeGently closes the connection after its last answer without
// resetting it: a connection closed with request frames still unread
// sends the client a reset, and a reset makes the client's system drop
// the answers it has received and not yet read, so a client would not
// learn the outcome of requests that were carried out. The stream sends
// its end of data instead, then reads and drops what the client still
// sends until the client closes too, or for lingerTimeout at most.
func (s *conn) closeGently() {
	if cw, ok := s.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = s.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.Copy(io.Discard, s.rd)
	}
	_ = s.nc.Close()
}

// stop ends the stream, for a server shutting down: no frame is read any
// more, and the requests in flight finish and are answered. A long poll
// among them ends as the engine closes.
func (s *conn) stop() {
	s.stopOne.Do(func() { close(s.stopped) })
	_ = s.nc.SetReadDeadline(time.Unix(1, 0))
}

// maxBatch bounds the frames of one batch (Options.Batchable).
const maxBatch = 64

// readLoop reads request frames and starts each until the stream ends. It
// returns an error for a frame that breaks the protocol, after queueing
// the answer of a frame too long if there was one. Batchable frames read
// one after another, each whole in the buffer when its turn came, are
// started together as one batch.
func (s *conn) readLoop() error {
	var batch []frameJob
	defer func() { s.startBatch(batch) }()
	for {
		joining := len(batch) > 0 && len(batch) < maxBatch && stream.FrameBuffered(s.rd) && s.trySlot()
		if !joining {
			s.startBatch(batch)
			batch = nil
			select {
			case s.slots <- struct{}{}:
			case <-s.ctx.Done():
				return nil
			case <-s.stopped:
				return nil
			}
		}
		j, ok, err := s.readRequest()
		switch {
		case errors.Is(err, errStreamEnd):
			return nil
		case err != nil:
			return err
		case !ok:
			continue // a cancel frame
		}
		if s.srv.opts.Batchable != nil && s.srv.opts.Batchable(j.f.Method, j.f.Target) && (joining || stream.FrameBuffered(s.rd)) {
			if batch == nil {
				batch = (*batchPool.Get().(*[]frameJob))[:0]
			}
			batch = append(batch, j)
			continue
		}
		s.startBatch(batch)
		batch = nil
		if j.alone && s.rd.Buffered() == 0 && s.srv.opts.Inline != nil && s.srv.opts.Inline(j.f.Method, j.f.Target) {
			s.handleInline(j)
			continue
		}
		s.dispatch(j)
	}
}

// batchPool recycles the arrays of batches (readLoop), which hold up to
// maxBatch frames, once their batch is served (handleLoop).
var batchPool = sync.Pool{New: func() any {
	b := make([]frameJob, 0, maxBatch)
	return &b
}}

// recycleBatch clears the array of a batch started or served, so that it
// keeps nothing alive, and returns it to batchPool.
func recycleBatch(batch []frameJob) {
	clear(batch)
	batchPool.Put(&batch)
}

// trySlot takes a slot for one more request in flight if one is free.
func (s *conn) trySlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// errStreamEnd is readRequest's word for a stream that ended: the client
// left, or stop was called.
var errStreamEnd = errors.New("stream ended")

// readRequest reads one frame, for which the caller took a slot, and
// registers its request. It reports false for a frame that is no request
// (a cancel, which it carries out), errStreamEnd when the stream ended,
// and any other error for a frame that breaks the protocol, after
// queueing the answer of a frame too long.
func (s *conn) readRequest() (frameJob, bool, error) {
	f, err := stream.ReadRequest(s.rd, s.limit)
	var tooLong *stream.TooLargeError
	switch {
	case errors.As(err, &tooLong):
		s.answers <- s.errorAnswer(tooLong.ID, &Error{Kind: FrameTooLarge, Message: fmt.Sprintf(
			"frame of %d bytes exceeds the limit of %d (the request body limit plus the frame header)", tooLong.Length, tooLong.Limit)})
		return frameJob{}, false, err // the answer keeps the slot
	case errors.Is(err, stream.ErrMalformed):
		<-s.slots
		return frameJob{}, false, err
	case err != nil:
		<-s.slots
		return frameJob{}, false, errStreamEnd
	case f.Method == stream.MethodCancel:
		<-s.slots
		s.cancelRequest(f.ID)
		return frameJob{}, false, nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	_, dup := s.inflight[f.ID]
	if !dup {
		s.inflight[f.ID] = cancel
	}
	alone := len(s.inflight) == 1
	s.mu.Unlock()
	if dup {
		cancel()
		<-s.slots
		return frameJob{}, false, fmt.Errorf("frame %d: the id of a request in flight", f.ID)
	}
	return frameJob{ctx: ctx, cancel: cancel, f: f, alone: alone}, true, nil
}

// startBatch starts the frames of batch: as one batch, on the reader
// when runsInline allows it and on a goroutine of its own otherwise, or a
// lone frame as any other.
func (s *conn) startBatch(batch []frameJob) {
	switch len(batch) {
	case 0:
	case 1:
		s.dispatch(batch[0])
		recycleBatch(batch)
	default:
		if !s.runsInline(batch) {
			s.dispatch(frameJob{batch: batch})
			return
		}
		s.srv.inlined.Add(int64(len(batch)))
		s.handleBatch(batch, true, true)
		recycleBatch(batch)
	}
}

// runsInline reports whether batch runs on the reader: its frames are the
// stream's only requests in flight, no other frame has been read, and
// each frame's request waits for nothing but the store (Options.Inline).
// Under load, the requests of a stream come in waves: the callers
// answered together send their next requests together, and the stream
// has nothing else in flight while their batch runs. The wave then saves
// the hand-overs to a handler goroutine and to the writer, and a frame
// that arrives meanwhile waits at most that long to be read.
func (s *conn) runsInline(batch []frameJob) bool {
	if s.srv.opts.Inline == nil || s.rd.Buffered() > 0 {
		return false
	}
	for _, j := range batch {
		if !s.srv.opts.Inline(j.f.Method, j.f.Target) {
			return false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) == len(batch)
}

// handleInline runs j on the reader's goroutine and writes its answer
// itself when the writer is idle. It is for a frame that is the stream's
// only request in flight, with no other frame read yet, and whose request
// waits for nothing but the store (Options.Inline): a lone caller then
// saves the hand-overs to a handler goroutine and to the writer, and a
// frame that arrives meanwhile waits at most that long to be read.
func (s *conn) handleInline(j frameJob) {
	s.srv.inlined.Add(1)
	s.joinOpen.Store(true)
	a := s.run(store.WithSyncJoin(j.ctx, s.join), j.cancel, j.f)
	s.joinOpen.Store(false)
	if len(s.answers) > 0 || !s.wmu.TryLock() {
		s.answers <- a
		return
	}
	defer s.wmu.Unlock()
	s.write(a, true)
}

// frameJob is a request frame read and waiting for a goroutine to run it,
// or a batch of them.
type frameJob struct {
	ctx    context.Context
	cancel context.CancelFunc
	f      stream.Request
	alone  bool       // the stream's only request in flight when read
	batch  []frameJob // set for a batch, which has no frame of its own
}

// dispatch hands j to an idle handler goroutine of the stream, or starts
// one. Handler goroutines live as long as the stream, so that their
// stacks, grown by the first request, serve the next ones too; there are
// never more than MaxInFlight of them, since one starts only when
// every other is busy with a request holding a slot.
func (s *conn) dispatch(j frameJob) {
	select {
	case s.work <- j:
	default:
		s.handlers.Add(1)
		go s.handleLoop(j)
	}
}

// handleLoop runs j, then each job dispatched to it, until the stream
// ends.
func (s *conn) handleLoop(j frameJob) {
	defer s.handlers.Done()
	for {
		if j.batch != nil {
			s.handleBatch(j.batch, false, false)
			recycleBatch(j.batch)
		} else {
			s.handle(j.ctx, j.cancel, j.f)
		}
		select {
		case j = <-s.work:
		case <-s.read:
			return
		}
	}
}

// cancelRequest cancels the request id, if it is in flight.
func (s *conn) cancelRequest(id uint32) {
	s.mu.Lock()
	cancel := s.inflight[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// handle runs one request frame and queues its answer for the writer.
func (s *conn) handle(ctx context.Context, cancel context.CancelFunc, f stream.Request) {
	s.answers <- s.run(ctx, cancel, f)
}

// run runs one request frame through the API's handler and returns its
// answer. A panic of the handler is logged and answered internal_error,
// so that it ends neither the stream nor the server.
func (s *conn) run(ctx context.Context, cancel context.CancelFunc, f stream.Request) stream.Answer {
	w := &frameWriter{}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					s.srv.opts.Logger.Error("panic serving a stream frame", "method", f.Method, "target", f.Target, "panic", p, "stack", string(debug.Stack()))
				}
				w = &frameWriter{}
				s.srv.opts.WriteError(w, nil, errInternal)
			}
		}()
		r, err := s.request(ctx, f)
		if err != nil {
			s.srv.opts.WriteError(w, nil, err)
			return
		}
		s.srv.opts.Handler.ServeHTTP(w, r)
	}()
	return s.answer(f, cancel, w)
}

// handleBatch serves the frames of batch through Options.ServeBatch and
// queues their answers for the writer; a batch run on the reader (inline)
// writes them itself when the writer is idle. Should ServeBatch panic, the
// panic is logged and every frame of the batch answered internal_error.
func (s *conn) handleBatch(batch []frameJob, inline, join bool) {
	s.srv.batched.Add(int64(len(batch)))
	ws := make([]*frameWriter, len(batch))
	rs := make([]*http.Request, 0, len(batch))
	served := make([]http.ResponseWriter, 0, len(batch))
	for i, j := range batch {
		ws[i] = &frameWriter{}
		r, err := s.request(j.ctx, j.f)
		if err != nil {
			s.srv.opts.WriteError(ws[i], nil, err)
			continue
		}
		rs = append(rs, r)
		served = append(served, ws[i])
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					s.srv.opts.Logger.Error("panic serving a batch of stream frames", "frames", len(batch), "panic", p, "stack", string(debug.Stack()))
				}
				for i := range ws {
					ws[i] = &frameWriter{}
					s.srv.opts.WriteError(ws[i], nil, errInternal)
				}
			}
		}()
		if len(rs) > 0 {
			ctx := s.ctx
			if join {
				ctx = s.joinCtx
				s.joinOpen.Store(true)
				defer s.joinOpen.Store(false)
			}
			s.srv.opts.ServeBatch(ctx, rs, served)
		}
	}()
	if !inline || len(s.answers) > 0 || !s.wmu.TryLock() {
		for i, j := range batch {
			s.answers <- s.answer(j.f, j.cancel, ws[i])
		}
		return
	}
	defer s.wmu.Unlock()
	for i, j := range batch {
		s.put(s.answer(j.f, j.cancel, ws[i]))
	}
	s.finish(true)
}

// answer ends the request of frame f, whose handler wrote w, and returns
// its answer frame.
func (s *conn) answer(f stream.Request, cancel context.CancelFunc, w *frameWriter) stream.Answer {
	s.mu.Lock()
	delete(s.inflight, f.ID)
	s.mu.Unlock()
	cancel()
	if w.header != nil {
		clear(w.header)
		headerPool.Put(w.header)
		w.header = nil
	}
	status := w.code
	if status == 0 {
		status = http.StatusOK // net/http's answer of a handler that wrote nothing
	}
	if f.Method == http.MethodHead {
		w.body = nil // as over HTTP: the answer to HEAD has no body
	}
	if len(w.body) > math.MaxUint32-16 {
		s.srv.opts.Logger.Error("answer too long for a frame", "method", f.Method, "target", f.Target, "bytes", len(w.body))
		return s.errorAnswer(f.ID, errInternal)
	}
	return stream.Answer{ID: f.ID, Status: status, Body: w.body}
}

// request makes the HTTP request of frame f: its method, target and body,
// with the Authorization, Host and remote address of the upgrade.
func (s *conn) request(ctx context.Context, f stream.Request) (*http.Request, error) {
	if !validMethod(f.Method) {
		return nil, &Error{Kind: InvalidRequest, Message: fmt.Sprintf("frame %d: method %q is not an HTTP method", f.ID, f.Method)}
	}
	if f.Target == "" || f.Target[0] != '/' {
		return nil, &Error{Kind: InvalidRequest, Message: fmt.Sprintf("frame %d: the target must be a path starting with /", f.ID)}
	}
	u, err := s.targetURL(f.Target)
	if err != nil {
		return nil, &Error{Kind: InvalidRequest, Message: fmt.Sprintf("frame %d: target %q is not a path and query", f.ID, f.Target)}
	}
	r := &http.Request{
		Method: f.Method, URL: u, RequestURI: f.Target,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        s.headers[min(len(f.Body), 1)],
		Body:          http.NoBody,
		ContentLength: int64(len(f.Body)),
		Host:          s.host,
		RemoteAddr:    s.remote,
	}
	if len(f.Body) > 0 {
		b := &frameBody{}
		b.Reset(f.Body)
		r.Body = b
	}
	return r.WithContext(ctx), nil
}

// targetURL returns the parsed target of a frame, from the stream's cache
// of the targets it parsed when it is there: the stream's requests share
// it, read-only (Options.Handler).
func (s *conn) targetURL(target string) (*url.URL, error) {
	s.tmu.Lock()
	u, ok := s.targets[target]
	s.tmu.Unlock()
	if ok {
		return u, nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, err
	}
	s.tmu.Lock()
	if len(s.targets) >= maxTargets {
		clear(s.targets)
	}
	s.targets[target] = u
	s.tmu.Unlock()
	return u, nil
}

// maxTargets bounds the targets a stream keeps parsed.
const maxTargets = 64

// jsonContentType is the Content-Type of a frame's body. Shared: handlers
// only read request headers.
var jsonContentType = []string{"application/json"}

// validMethod reports whether m is an HTTP method token.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c < '!' || c > '~' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// frameBody is a frame's body as a request body.
type frameBody struct{ bytes.Reader }

// Close implements io.Closer.
func (*frameBody) Close() error { return nil }

// frameWriter is the http.ResponseWriter of a frame: it keeps the status
// and body for the answer frame. Headers are dropped: an answer frame has
// none.
type frameWriter struct {
	header http.Header
	code   int
	body   []byte
}

// Header implements http.ResponseWriter. The header comes from
// headerPool, and goes back there once the answer is made (answer).
func (w *frameWriter) Header() http.Header {
	if w.header == nil {
		w.header = headerPool.Get().(http.Header)
	}
	return w.header
}

// headerPool keeps the headers of frameWriters, which handlers fill (a
// Content-Type, a Retry-After) although an answer frame has none, so that
// they cost no allocation.
var headerPool = sync.Pool{New: func() any { return make(http.Header, 2) }}

// WriteHeader implements http.ResponseWriter.
func (w *frameWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

// Write implements http.ResponseWriter.
func (w *frameWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// errorAnswer is the answer frame of err to the request id.
func (s *conn) errorAnswer(id uint32, err error) stream.Answer {
	w := &frameWriter{}
	s.srv.opts.WriteError(w, nil, err)
	return stream.Answer{ID: id, Status: w.code, Body: w.body}
}

// errInternal is the answer to a frame whose handler panicked or whose
// answer is too long for a frame; the details are logged.
var errInternal = &Error{Kind: Internal, Message: "internal server error"}

// writeLoop writes the queued answers, flushing whenever the queue is
// empty, until the queue is closed. A failed write stops the stream; the
// answers written after it are dropped.
func (s *conn) writeLoop() {
	for a := range s.answers {
		s.wmu.Lock()
		s.write(a, false)
		s.wmu.Unlock()
	}
}

// write writes answer a, and flushes when flush is set or no other answer
// is queued; it frees a's slot. The caller holds wmu.
func (s *conn) write(a stream.Answer, flush bool) {
	s.put(a)
	s.finish(flush)
}

// put writes answer a into the buffer and frees its slot. The caller
// holds wmu.
func (s *conn) put(a stream.Answer) {
	defer func() { <-s.slots }()
	if s.broken {
		return
	}
	if err := stream.WriteAnswer(s.w, a); err != nil {
		s.broke(err)
	}
}

// finish flushes the answers put when flush is set or no other answer is
// queued. The caller holds wmu.
func (s *conn) finish(flush bool) {
	if s.broken {
		return
	}
	if !flush && len(s.answers) == 0 {
		// Let the handlers about to answer (a commit answers many at
		// once) queue their answers before the flush.
		runtime.Gosched()
	}
	if flush || len(s.answers) == 0 {
		_ = s.nc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if err := s.w.Flush(); err != nil {
			s.broke(err)
		}
	}
}

// broke stops the stream after a failed write. The caller holds wmu.
func (s *conn) broke(err error) {
	s.broken = true
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.srv.opts.Logger.Warn("stream closed: the client does not read its answers", "remote", s.remote)
	}
	s.stop()
}

// joinArrivals serves, as one batch, the single enqueues that arrived
// while a batch (or a lone frame) run on the reader committed, before
// that commit's fsync begins (store.WithSyncJoin): they then share it. It
// runs while the reader waits for that batch, on the goroutine of the
// batch that calls it first (joinOpen), and writes the answers itself as
// the reader would. Under
// load, the callers a stream's answers freed send their next requests
// while the other callers' batch commits; without this, those requests
// wait for that batch's fsync before they are even read, then for an
// fsync of their own, and the stream's waves take turns at the disk. It
// reads only frames already received whole, and only while the next is a
// single enqueue, so that it never waits for the client.
func (s *conn) joinArrivals() {
	if !s.joinOpen.CompareAndSwap(true, false) {
		return
	}
	select {
	case <-s.stopped:
		return
	case <-s.ctx.Done():
		return
	default:
	}
	if n := arrivedBytes(s.nc); n > 0 {
		_, _ = s.rd.Peek(min(s.rd.Buffered()+n, s.rd.Size()))
	}
	var batch []frameJob
	for len(batch) < maxBatch && s.nextJoins() && s.trySlot() {
		j, ok, err := s.readRequest()
		if err != nil || !ok {
			break // cannot happen: nextJoins checked the frame
		}
		if batch == nil {
			batch = (*batchPool.Get().(*[]frameJob))[:0]
		}
		batch = append(batch, j)
	}
	if len(batch) == 0 {
		return
	}
	s.srv.inlined.Add(int64(len(batch)))
	s.handleBatch(batch, true, false)
	recycleBatch(batch)
}

// nextJoins reports whether the next frame is whole in the buffer, is a
// request that Inline and Batchable both allow, and has an id not in
// flight: one that joinArrivals may read and serve.
func (s *conn) nextJoins() bool {
	id, method, target, ok := stream.PeekRequest(s.rd, s.limit)
	if !ok || s.srv.opts.Inline == nil || s.srv.opts.Batchable == nil ||
		!s.srv.opts.Inline(method, target) || !s.srv.opts.Batchable(method, target) {
		return false
	}
	s.mu.Lock()
	_, busy := s.inflight[id]
	s.mu.Unlock()
	return !busy
}
