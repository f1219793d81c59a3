package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// DefaultMaxAnswer bounds one answer frame a client reads unless
// Config.MaxAnswer says otherwise: far above any answer of the API, low
// enough that a garbled length cannot exhaust memory.
const DefaultMaxAnswer = 1 << 30

// writeQueue is how many frames wait for a connection's writer before
// callers block: the client's back-pressure.
const writeQueue = 1024

// ErrClosed is the error of calls on a connection closed by Close.
var ErrClosed = errors.New("stream connection closed")

// errNotSent marks an error of a call whose frame never reached the
// connection's writer, so that it can be sent again on a new connection.
var errNotSent = errors.New("frame not sent")

// Conn is the client side of one spool-stream/1 connection. Many
// goroutines share it: each Do sends a request frame and waits for the
// answer with the same id. One writer goroutine writes the frames through
// a buffer that it flushes when no more frames wait, so that frames sent
// at about the same time share a write. Answers are read by the callers
// themselves, one at a time: the caller holding the reader's turn reads
// and hands each answer to its caller until its own comes, then passes
// the turn to a caller still waiting. A lone caller thus reads its own
// answer, with no hand-over between goroutines. Once the connection
// breaks, every call in flight and every later call fails with the error
// that broke it (Err); a Conn is never reconnected (Client does that).
type Conn struct {
	nc        net.Conn
	rd        *bufio.Reader
	maxAnswer int64
	writes    chan []byte
	done      chan struct{} // closed once the connection is broken

	// wmu is held by whoever writes to w: the writer's goroutine, or a
	// lone caller (writeAlone).
	wmu sync.Mutex
	w   *bufio.Writer

	// turn holds the reader's one token while nobody reads.
	turn chan struct{}
	// rdl guards peeking and interrupted, by which a reader whose caller
	// leaves stops waiting for the next answer (see awaitAnswer).
	rdl         sync.Mutex
	peeking     bool
	interrupted bool
	// idle runs watch once nobody has read for idleWatch.
	idle *time.Timer
	// raw lets a lone caller look at the connection without reading it
	// (see probe); nil when nc has no file descriptor.
	raw syscall.RawConn

	failOnce sync.Once
	err      error // why the connection broke; set before done closes

	mu      sync.Mutex
	calls   map[uint32]*call // requests sent and not answered
	next    uint32           // the next id to try
	live    int              // calls whose callers still wait
	retired bool             // close once live reaches 0
}

// call is one request in flight.
type call struct {
	answer    chan Answer // buffered: the reader never blocks on it
	abandoned bool        // the caller left; the answer will be dropped
}

// framePool recycles request frames once written.
var framePool = sync.Pool{New: func() any { return new([]byte) }}

// Do sends one request and returns its answer. It fails with ctx's error
// when ctx ends first, which abandons the request: a cancel frame asks the
// server to stop it, and its answer is dropped when it comes. It fails
// with an error wrapping Err when the connection breaks first; the request
// may then have taken effect or not, as with an HTTP request whose
// connection drops.
func (c *Conn) Do(ctx context.Context, method, target string, body []byte) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	id, cl, alone, err := c.open()
	if err != nil {
		return Answer{}, err
	}
	bp := framePool.Get().(*[]byte)
	frame, err := AppendRequest((*bp)[:0], Request{ID: id, Method: method, Target: target, Body: body})
	if err != nil {
		framePool.Put(bp)
		c.forget(id)
		return Answer{}, fmt.Errorf("encode frame: %w", err)
	}
	if alone {
		if err := c.probe(); err != nil {
			framePool.Put(bp)
			c.forget(id)
			return Answer{}, err
		}
	}
	if !alone || !c.writeAlone(frame) {
		select {
		case c.writes <- frame:
		case <-ctx.Done():
			c.forget(id)
			return Answer{}, ctx.Err()
		case <-c.done:
			return Answer{}, fmt.Errorf("%w: %w", errNotSent, c.err)
		}
	}
	return c.await(ctx, id, cl)
}

// await waits for the answer of the call id, reading answers itself
// whenever it holds the reader's turn.
func (c *Conn) await(ctx context.Context, id uint32, cl *call) (Answer, error) {
	for {
		select {
		case a := <-cl.answer:
			return a, nil
		case <-c.turn:
			a, err := c.read(ctx, cl)
			c.release()
			switch {
			case err == nil:
				return a, nil
			case err == errLeft:
				if c.abandon(id) {
					c.cancel(id)
				}
				return Answer{}, ctx.Err()
			}
			// The connection broke: done is closed.
		case <-ctx.Done():
			if c.abandon(id) {
				c.cancel(id)
			}
			return Answer{}, ctx.Err()
		case <-c.done:
			select {
			case a := <-cl.answer: // answered just before the break
				return a, nil
			default:
			}
			return Answer{}, c.err
		}
	}
}

// errLeft is read's error when its caller's ctx ended; errBroken when the
// connection broke.
var (
	errLeft   = errors.New("caller left")
	errBroken = errors.New("connection broken")
)

// read, run by the holder of the reader's turn, reads answers and hands
// each to its caller until the answer of call cl comes, which it
// returns. It stops with errLeft when ctx ends while no answer is being
// read, and with errBroken once the connection broke.
func (c *Conn) read(ctx context.Context, cl *call) (Answer, error) {
	for {
		select {
		case a := <-cl.answer: // handed over by the reader before
			return a, nil
		default:
		}
		if err := c.awaitAnswer(ctx); err != nil {
			return Answer{}, err
		}
		a, err := ReadAnswer(c.rd, c.maxAnswer)
		if err != nil {
			return Answer{}, c.readFailed(err)
		}
		own, _, err := c.deliver(a, cl)
		if err != nil {
			return Answer{}, err
		}
		if own {
			return a, nil
		}
	}
}

// awaitAnswer waits until an answer's first byte can be read. It stops
// with errLeft when ctx ends first: only then, with no byte of an answer
// taken, can a reader stop without losing its place in the stream.
func (c *Conn) awaitAnswer(ctx context.Context) error {
	if c.rd.Buffered() > 0 {
		return nil
	}
	if ctx.Done() == nil {
		_, err := c.rd.Peek(1)
		return c.readFailed(err)
	}
	c.rdl.Lock()
	c.peeking = true
	c.rdl.Unlock()
	stop := context.AfterFunc(ctx, c.interrupt)
	_, err := c.rd.Peek(1)
	stop()
	c.rdl.Lock()
	c.peeking = false
	interrupted := c.interrupted
	c.interrupted = false
	c.rdl.Unlock()
	if interrupted {
		_ = c.nc.SetReadDeadline(time.Time{})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errLeft
		}
	}
	return c.readFailed(err)
}

// interrupt ends the wait of a reader for an answer's first byte, if it
// still waits.
func (c *Conn) interrupt() {
	c.rdl.Lock()
	defer c.rdl.Unlock()
	if c.peeking {
		c.interrupted = true
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// readFailed breaks the connection for a failed read and returns
// errBroken; nil for nil.
func (c *Conn) readFailed(err error) error {
	if err == nil {
		return nil
	}
	select {
	case <-c.done: // closed here: keep that reason
	default:
		c.fail(fmt.Errorf("stream connection lost: read answer: %w", err))
	}
	return errBroken
}

// deliver hands answer a to its caller, unless that is the call mine,
// whose caller reads it: it reports whether a is mine's, and whether it
// went to another caller still waiting. An answer for no request in flight
// breaks the connection.
func (c *Conn) deliver(a Answer, mine *call) (own, handed bool, err error) {
	c.mu.Lock()
	cl := c.calls[a.ID]
	delete(c.calls, a.ID)
	own = cl != nil && cl == mine
	if cl != nil && !cl.abandoned {
		c.live--
		if !own {
			cl.answer <- a
			handed = true
		}
	}
	idle := c.retired && c.live == 0
	c.mu.Unlock()
	switch {
	case cl == nil:
		c.fail(fmt.Errorf("stream connection lost: answer for unknown request %d", a.ID))
		return false, false, errBroken
	case idle:
		c.Close()
	}
	return own, handed, nil
}

// release passes the reader's turn on: to a caller waiting for it, or to
// the next one. Once nobody has read for idleWatch, watch reads.
func (c *Conn) release() {
	c.turn <- struct{}{}
	if c.Err() == nil {
		c.idle.Reset(idleWatch)
	}
}

// idleWatch is how long a stream goes unread before watch reads it.
const idleWatch = 50 * time.Millisecond

// watch reads the stream while no caller does, once it has gone unread
// for idleWatch: a server that closes an idle stream is then seen at once
// (Done closes), and the answers of calls whose callers left are read. It
// stops when it hands an answer to a waiting caller, whose next call may
// read its own, or when the stream breaks.
func (c *Conn) watch() {
	select {
	case <-c.turn:
	default:
		return // a caller reads
	}
	defer c.release()
	for {
		if c.awaitAnswer(context.Background()) != nil {
			return
		}
		a, err := ReadAnswer(c.rd, c.maxAnswer)
		if err != nil {
			c.readFailed(err)
			return
		}
		if _, handed, err := c.deliver(a, nil); err != nil || handed {
			return
		}
	}
}

// probe looks, for a lone caller about to send, whether the server closed
// the connection while nobody read it, without reading or waiting. A
// connection closed (or reset) breaks before the frame is sent, so that
// Client sends it on a new connection: a server that restarted between
// two calls costs no failed call. It looks only when nobody holds the
// reader's turn; a reader sees the close itself.
func (c *Conn) probe() error {
	if c.raw == nil {
		return nil
	}
	select {
	case <-c.turn:
	default:
		return nil
	}
	defer c.release()
	if c.rd.Buffered() > 0 {
		return nil
	}
	err := peekClosed(c.raw)
	if err == nil {
		return nil
	}
	c.readFailed(err)
	return fmt.Errorf("%w: %w", errNotSent, c.err)
}

// writeAlone writes frame to the connection itself and reports whether
// it did: it does when no frame waits for the writer and the writer is not
// writing. A lone caller then saves the hand-over to the writer's
// goroutine; callers that come together still share the writer's
// flushes. A failed write breaks the connection.
func (c *Conn) writeAlone(frame []byte) bool {
	if len(c.writes) > 0 || !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	_, err := c.w.Write(frame)
	recycleFrame(frame)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.fail(fmt.Errorf("stream connection lost: write request: %w", err))
	}
	return true
}

// open registers a new call under an id no request in flight has, and
// reports whether it is the only call in flight.
func (c *Conn) open() (uint32, *call, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return 0, nil, false, fmt.Errorf("%w: %w", errNotSent, c.err)
	default:
	}
	id := c.next
	for c.calls[id] != nil {
		id++
	}
	c.next = id + 1
	cl := &call{answer: make(chan Answer, 1)}
	c.calls[id] = cl
	c.live++
	return id, cl, len(c.calls) == 1, nil
}

// abandon marks the call id, whose request was sent, as left by its
// caller, and reports whether it was still waiting for its answer. The id
// stays taken until the answer comes, so that it is not reused while the
// server may still answer it.
func (c *Conn) abandon(id uint32) bool {
	return c.drop(id, false)
}

// forget drops the call id, whose request was never sent.
func (c *Conn) forget(id uint32) {
	c.drop(id, true)
}

func (c *Conn) drop(id uint32, unsent bool) bool {
	c.mu.Lock()
	cl := c.calls[id]
	waiting := cl != nil && !cl.abandoned
	if waiting {
		cl.abandoned = true
		c.live--
	}
	if unsent {
		delete(c.calls, id)
	}
	idle := c.retired && c.live == 0
	c.mu.Unlock()
	if idle {
		c.Close()
	}
	return waiting
}

// cancel asks the server to stop the request id, without waiting for room
// in the write queue.
func (c *Conn) cancel(id uint32) {
	frame, _ := AppendRequest(nil, Request{ID: id, Method: MethodCancel})
	select {
	case c.writes <- frame:
	default:
		go func() {
			select {
			case c.writes <- frame:
			case <-c.done:
			}
		}()
	}
}

// Close closes the connection; calls in flight fail with ErrClosed. It is
// idempotent.
func (c *Conn) Close() { c.fail(ErrClosed) }

// Retire closes the connection once no caller waits for an answer on it:
// at once when none does. Calls made after Retire still work, and delay
// the close until they are answered; Client makes none.
func (c *Conn) Retire() {
	c.mu.Lock()
	c.retired = true
	idle := c.live == 0
	c.mu.Unlock()
	if idle {
		c.Close()
	}
}

// Done is closed when the connection is broken or closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection broke, or nil while it works.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// fail breaks the connection with err, once.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		close(c.done)
		c.idle.Stop()
		_ = c.nc.Close()
	})
}

// writeLoop writes queued frames, flushing whenever the queue is empty
// (after one yield, so that frames sent together share the write), until
// the connection breaks.
func (c *Conn) writeLoop() {
	w := c.w
	for {
		select {
		case frame := <-c.writes:
			c.wmu.Lock()
			_, err := w.Write(frame)
			recycleFrame(frame)
			if err == nil && len(c.writes) == 0 {
				// Let the callers about to send (an answer burst wakes
				// many) queue their frames before the flush.
				runtime.Gosched()
			}
			if err == nil && len(c.writes) == 0 {
				err = w.Flush()
			}
			c.wmu.Unlock()
			if err != nil {
				c.fail(fmt.Errorf("stream connection lost: write request: %w", err))
				return
			}
		case <-c.done:
			return
		}
	}
}

// recycleFrame returns a written frame's buffer to the pool.
func recycleFrame(frame []byte) {
	if cap(frame) <= maxPooledFrame {
		frame = frame[:0]
		framePool.Put(&frame)
	}
}

// maxPooledFrame keeps one huge request from pinning its buffer.
const maxPooledFrame = 64 << 10
