package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Bounds on how a Worker gathers the outcomes of its jobs.
const (
	// SettleDelay is the most a Worker holds a finished job's ack or fail
	// for the outcomes of other handlers to share its call, and a fetch for
	// more slots to free. It holds none when no other handler runs, since
	// nothing could join, nor once it stops. A few milliseconds let the
	// handlers of a fetched batch, which finish within microseconds of
	// each other when short, share one call, at a latency few jobs notice.
	SettleDelay = 2 * time.Millisecond
	// maxSettleBatch bounds the items of one ack or fail call, well under
	// the server's batch limit.
	maxSettleBatch = 1000
	// maxSettleBytes bounds the results and error texts gathered for one
	// flush, well under the server's limit on a request body.
	maxSettleBytes = 4 << 20
)

// settleCall is one job's ack (fail false) or fail waiting in a settler,
// and, once done is closed, its answer: the single form's result and
// error, as Client.Ack or Client.Fail would return them.
type settleCall struct {
	id     string
	token  int64
	fail   bool
	result []byte     // an ack's result, JSON, or nil
	params FailParams // a fail's

	acked  *AckResult
	failed *FailResult
	err    error
	done   chan struct{}
}

// size is how many bytes of the request c adds, roughly.
func (c *settleCall) size() int {
	return len(c.id) + len(c.result) + len(c.params.Error) + 64
}

// settler gathers the acks and fails of jobs whose handlers finished at
// about the same time and sends them as one batch call each (POST
// /v1/jobs/ack, POST /v1/jobs/fail). Each call keeps its own answer: the
// server applies a batch's items one by one, so a stale token fails only
// its own job, and a whole call's error is each of its jobs' error. A
// call waits at most delay, less when maxItems are waiting, the worker is
// idle, or it stops.
type settler struct {
	c        *Client
	base     context.Context // the calls' context, without cancellation
	delay    time.Duration
	maxItems int

	mu      sync.Mutex
	coming  int // outcomes on their way: of jobs started, not yet here
	acks    []*settleCall
	fails   []*settleCall
	bytes   int // size of the waiting calls
	timer   *time.Timer
	flights sync.WaitGroup

	// holdFor, set by tests, holds the outcomes until that many wait (or
	// the worker stops), whatever is on its way, for the first send only.
	// queued, when set, is told of each call as it starts waiting.
	holdFor int
	queued  func(id string)
}

// expect counts n more outcomes on their way (n < 0: fewer), from jobs
// started or given up. Once none is, what waits goes.
func (s *settler) expect(n int) {
	s.mu.Lock()
	s.coming += n
	if s.coming <= 0 && s.holdFor == 0 && len(s.acks)+len(s.fails) > 0 {
		s.flushLocked()
	}
	s.mu.Unlock()
}

// settle sends c's ack or fail with those waiting, and returns once it is
// answered. arrived says that c is the first outcome of its job to come,
// one that expect counted. It sends at once when the worker is stopping or
// no other outcome is on its way (no other handler runs).
func (s *settler) settle(c *settleCall, arrived, stopping bool) {
	c.done = make(chan struct{})
	s.mu.Lock()
	if arrived {
		s.coming--
	}
	if c.fail {
		s.fails = append(s.fails, c)
	} else {
		s.acks = append(s.acks, c)
	}
	s.bytes += c.size()
	if s.queued != nil {
		s.queued(c.id)
	}
	switch {
	case s.holdFor > 0:
		if stopping || len(s.acks)+len(s.fails) >= s.holdFor {
			s.flushLocked()
		}
	case stopping || s.coming <= 0 || s.delay <= 0 || len(s.acks) >= s.maxItems || len(s.fails) >= s.maxItems ||
		s.bytes >= maxSettleBytes:
		s.flushLocked()
	case s.timer == nil:
		s.timer = time.AfterFunc(s.delay, s.flush)
	}
	s.mu.Unlock()
	<-c.done
}

// flush sends what is waiting.
func (s *settler) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

// flushLocked starts the calls for what is waiting. s.mu is held.
func (s *settler) flushLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	acks, fails := s.acks, s.fails
	s.acks, s.fails, s.bytes, s.holdFor = nil, nil, 0, 0
	for _, calls := range [][]*settleCall{acks, fails} {
		if len(calls) == 0 {
			continue
		}
		s.flights.Add(1)
		go func() {
			defer s.flights.Done()
			s.send(calls)
		}()
	}
}

// send makes one batch call for calls, all acks or all fails, and answers
// each. A refusal of the whole call that names one item (a result over
// the server's limit, say) is that item's answer, and the others go
// again; a batch the server finds too large goes again in halves.
func (s *settler) send(calls []*settleCall) {
	for len(calls) > 0 {
		ctx, cancel := context.WithTimeout(s.base, callTimeout)
		err := s.call(ctx, calls)
		cancel()
		if err == nil {
			return
		}
		if i, itemErr := batchItem(err, len(calls)); i >= 0 {
			c := calls[i]
			c.err = fmt.Errorf("%s: %w", c.what(), itemErr)
			close(c.done)
			calls = append(calls[:i:i], calls[i+1:]...)
			continue
		}
		if len(calls) > 1 && (errors.Is(err, ErrBatchTooLarge) || errors.Is(err, ErrPayloadTooLarge)) {
			half := len(calls) / 2
			s.send(calls[:half])
			s.send(calls[half:])
			return
		}
		for _, c := range calls {
			c.err = fmt.Errorf("%s: %w", c.what(), err)
			close(c.done)
		}
		return
	}
}

// what names c's operation for its errors, as Client.Ack and Client.Fail
// do.
func (c *settleCall) what() string {
	if c.fail {
		return "fail job " + c.id
	}
	return "ack job " + c.id
}

// call makes the batch call for calls and, when it is answered, answers
// each of them.
func (s *settler) call(ctx context.Context, calls []*settleCall) error {
	if calls[0].fail {
		ws := make([]wireFail, len(calls))
		for i, c := range calls {
			ws[i] = wireFail{ID: c.id, Token: c.token, Error: c.params.Error, NoRetry: c.params.NoRetry, RetryAfterMS: msec(c.params.RetryAfter)}
		}
		out := make([]FailResult, len(calls))
		err := s.c.batch(ctx, "/v1/jobs/fail", ws, len(calls), func(i int, raw json.RawMessage) error {
			return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
		})
		if err != nil {
			return err
		}
		for i, c := range calls {
			if c.err = out[i].Err; c.err == nil {
				c.failed = &out[i]
			} else {
				c.err = fmt.Errorf("%s: %w", c.what(), c.err)
			}
			close(c.done)
		}
		return nil
	}
	ws := make([]wireAck, len(calls))
	for i, c := range calls {
		ws[i] = wireAck{ID: c.id, Token: c.token, Result: c.result}
	}
	out := make([]AckResult, len(calls))
	err := s.c.batch(ctx, "/v1/jobs/ack", ws, len(calls), func(i int, raw json.RawMessage) error {
		return decodeItem(raw, &out[i], &out[i].ID, &out[i].Err)
	})
	if err != nil {
		return err
	}
	for i, c := range calls {
		if c.err = out[i].Err; c.err == nil {
			c.acked = &out[i]
		} else {
			c.err = fmt.Errorf("%s: %w", c.what(), c.err)
		}
		close(c.done)
	}
	return nil
}

// batchField finds the item a batch call's error names, as in
// "items[3].result".
var batchField = regexp.MustCompile(`^items\[(\d+)\]\.?(.*)$`)

// batchItem returns the index of the item of a batch of n that err, the
// refusal of the whole call, names, and the error the single form would
// have given for it (its field without the "items[i]." prefix); -1 when
// err is not about one item.
func batchItem(err error, n int) (int, error) {
	var e *Error
	if !errors.As(err, &e) {
		return -1, nil
	}
	m := batchField.FindStringSubmatch(e.Field)
	if m == nil {
		return -1, nil
	}
	i, convErr := strconv.Atoi(m[1])
	if convErr != nil || i < 0 || i >= n {
		return -1, nil
	}
	one := *e
	one.Field = m[2]
	return i, &one
}
