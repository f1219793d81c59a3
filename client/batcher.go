package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Batcher defaults and bounds.
const (
	// DefaultBatcherInFlight is how many batch requests a Batcher keeps in
	// flight at once.
	DefaultBatcherInFlight = 2
	// DefaultBatcherMax is the most jobs a Batcher sends in one request.
	DefaultBatcherMax = 1000
)

// BatcherConfig configures a Batcher.
type BatcherConfig struct {
	// MaxInFlight is how many requests may be in flight at once. A call
	// made while that many are goes out with the next request, together
	// with every call made meanwhile. Defaults to DefaultBatcherInFlight.
	MaxInFlight int
	// MaxBatch is the most jobs in one request. Defaults to
	// DefaultBatcherMax. It must not exceed the server's batch limit
	// (10,000 by default).
	MaxBatch int
	// MaxDelay, when set, holds a call that finds no request in flight
	// for up to this long, for others to join it: fewer, larger requests
	// for sparse callers, at that much more latency. Zero sends at once.
	MaxDelay time.Duration
}

// Batcher is a producer for hot paths: it gathers the Enqueue calls that
// many goroutines make at nearly the same time and sends them as one batch
// request (POST /v1/jobs/batch), so that a thousand concurrent enqueues cost
// one request and one commit instead of a thousand. Each call still gets its
// own answer, with the semantics of Client.Enqueue: it returns once its job
// is durable, and a bad job fails only its own call (the server refuses a
// batch as a whole, so the Batcher sends the rest again without it). Jobs
// of DurabilityMemory share requests only with each other, as the server
// refuses a batch that mixes them with others. The price is up to MaxDelay
// of added latency when calls are sparse.
//
// A Batcher is safe for concurrent use. Close sends what is waiting and
// stops it.
type Batcher struct {
	c   *Client
	cfg BatcherConfig

	mu       sync.Mutex
	pending  []*batchCall
	timer    *time.Timer
	inFlight int
	closed   bool
	flights  sync.WaitGroup
}

// batchCall is one Enqueue call waiting in a Batcher.
type batchCall struct {
	ctx  context.Context
	w    *wireEnqueue
	res  EnqueueResult
	err  error
	done chan struct{}
}

// ErrBatcherClosed is returned by Enqueue after Close.
var ErrBatcherClosed = errors.New("batcher closed")

// NewBatcher returns a Batcher sending through c.
func NewBatcher(c *Client, cfg BatcherConfig) *Batcher {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultBatcherInFlight
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultBatcherMax
	}
	return &Batcher{c: c, cfg: cfg}
}

// Enqueue stores one job, sharing a request with the calls made at about
// the same time; see Client.Enqueue for the answer and its errors. When ctx
// ends before the batch is sent the call returns ctx's error and its job is
// left out; once the batch is sent the call waits for its answer.
func (b *Batcher) Enqueue(ctx context.Context, p EnqueueParams) (*EnqueueResult, error) {
	w, err := p.wire(ctx)
	if err != nil {
		return nil, err
	}
	call := &batchCall{ctx: ctx, w: w, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("enqueue job: %w", ErrBatcherClosed)
	}
	b.pending = append(b.pending, call)
	switch {
	case b.inFlight >= b.cfg.MaxInFlight && len(b.pending) < b.cfg.MaxBatch:
		// A request coming back sends the calls gathered meanwhile.
	case b.cfg.MaxDelay > 0 && len(b.pending) < b.cfg.MaxBatch:
		if b.timer == nil {
			b.timer = time.AfterFunc(b.cfg.MaxDelay, b.flush)
		}
	default:
		b.sendLocked()
	}
	b.mu.Unlock()
	<-call.done
	if call.err != nil {
		return nil, call.err
	}
	return &call.res, nil
}

// flush sends what is waiting.
func (b *Batcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sendLocked()
}

// sendLocked starts a request for the waiting calls. b.mu is held.
func (b *Batcher) sendLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.pending) == 0 {
		return
	}
	calls := b.pending
	if len(calls) > b.cfg.MaxBatch {
		calls, b.pending = calls[:b.cfg.MaxBatch:b.cfg.MaxBatch], calls[b.cfg.MaxBatch:]
	} else {
		b.pending = nil
	}
	b.inFlight++
	b.flights.Add(1)
	go func() {
		defer b.flights.Done()
		b.send(calls)
		b.mu.Lock()
		b.inFlight--
		if len(b.pending) > 0 && (b.closed || b.cfg.MaxDelay == 0 || len(b.pending) >= b.cfg.MaxBatch) {
			b.sendLocked()
		} else if len(b.pending) > 0 && b.timer == nil {
			b.timer = time.AfterFunc(b.cfg.MaxDelay, b.flush)
		}
		b.mu.Unlock()
	}()
}

// itemField finds the batch item an error names, as in "jobs[3].kind".
var itemField = regexp.MustCompile(`^jobs\[(\d+)\]\.?(.*)$`)

// send enqueues calls as batches, answering each. The server keeps memory
// jobs apart and refuses a batch that mixes them with others, so the
// calls that name DurabilityMemory go in a batch of their own.
func (b *Batcher) send(calls []*batchCall) {
	var memory, other []*batchCall
	for _, c := range calls {
		if c.w.Durability == DurabilityMemory {
			memory = append(memory, c)
		} else {
			other = append(other, c)
		}
	}
	for _, group := range [][]*batchCall{other, memory} {
		if len(group) > 0 {
			b.sendBatch(group, true)
		}
	}
}

// sendBatch enqueues calls as one batch, answering each. A refusal that
// names one item fails that call alone and the others go again. When
// split is set and the server refuses the batch for mixing memory jobs
// with others (which jobs taking their queue's level can do), the calls
// go again in one batch per level and queue.
func (b *Batcher) sendBatch(calls []*batchCall, split bool) {
	for len(calls) > 0 {
		live := calls[:0:0]
		for _, c := range calls {
			if err := c.ctx.Err(); err != nil {
				c.err = fmt.Errorf("enqueue job: %w", err)
				close(c.done)
				continue
			}
			live = append(live, c)
		}
		if len(live) == 0 {
			return
		}
		jobs := make([]*wireEnqueue, len(live))
		for i, c := range live {
			jobs[i] = c.w
		}
		var out struct {
			Jobs []EnqueueResult `json:"jobs"`
		}
		// The request runs to its end even when some callers give up: their
		// jobs may be stored, and the others wait for their answers.
		err := b.c.do(context.WithoutCancel(live[0].ctx), "POST", "/v1/jobs/batch", nil,
			map[string]any{"jobs": jobs}, &out)
		if err == nil && len(out.Jobs) != len(live) {
			err = fmt.Errorf("enqueue jobs: server answered %d results for %d jobs", len(out.Jobs), len(live))
		}
		if err == nil {
			for i, c := range live {
				c.res = out.Jobs[i]
				close(c.done)
			}
			return
		}
		bad := culprit(err, len(live))
		if bad < 0 && split && mixedLevels(err) {
			if groups := byLevel(live); len(groups) > 1 {
				for _, g := range groups {
					b.sendBatch(g, false)
				}
				return
			}
		}
		if bad < 0 {
			for _, c := range live {
				c.err = fmt.Errorf("enqueue job: %w", err)
				close(c.done)
			}
			return
		}
		live[bad].err = fmt.Errorf("enqueue job: %w", single(err))
		close(live[bad].done)
		calls = append(live[:bad:bad], live[bad+1:]...)
	}
}

// culprit returns the index of the batch item err names, or -1 when the
// error is about the batch as a whole.
func culprit(err error, n int) int {
	var e *Error
	if !errors.As(err, &e) {
		return -1
	}
	m := itemField.FindStringSubmatch(e.Field)
	if m == nil {
		return -1
	}
	i, convErr := strconv.Atoi(m[1])
	if convErr != nil || i < 0 || i >= n {
		return -1
	}
	return i
}

// mixedLevels reports whether err refuses a batch as a whole for mixing
// jobs of memory durability with others.
func mixedLevels(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "invalid_argument" && e.Field == "jobs"
}

// byLevel groups calls that share a level: the one they name, else their
// queue's. Groups keep the order of their first call, calls theirs.
func byLevel(calls []*batchCall) [][]*batchCall {
	index := map[string]int{}
	var groups [][]*batchCall
	for _, c := range calls {
		key := "level:" + string(c.w.Durability)
		if c.w.Durability == "" {
			key = "queue:" + cmp.Or(c.w.Queue, "default")
		}
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// single rewrites an item's error as Client.Enqueue would report it: the
// field without the "jobs[i]." prefix.
func single(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	if m := itemField.FindStringSubmatch(c.Field); m != nil {
		c.Field = m[2]
	}
	return &c
}

// Close sends the calls still waiting, waits for every request in flight
// and refuses later calls. It is idempotent.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.sendLocked()
	}
	b.mu.Unlock()
	b.flights.Wait()
	return nil
}
