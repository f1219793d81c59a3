package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ackWindow is how long a worker holds the acks of finished jobs while
// others of its jobs are still running, so that jobs finishing close
// together share one batch ack, as in a fast real worker.
const ackWindow = time.Millisecond

// worker is one worker loop, shaped like the Go client's Worker: it
// long-polls POST /v1/fetch for up to its free slots (of Concurrency),
// runs each job (the simulated work is a timer, so thousands of jobs at
// once cost no goroutines), frees the job's slot as soon as it finishes,
// and acks finished jobs in batches with POST /v1/jobs/ack while it
// fetches more. At most Concurrency jobs run at once, and at most twice
// that are held (running or waiting for their ack).
type worker struct {
	r    *runner
	done chan []heldJob // finished jobs waiting for their ack
	wake chan struct{}  // signalled when slots or holds are freed

	mu      sync.Mutex
	running int // jobs fetched and not finished
	held    int // jobs fetched and not acked
}

// heldJob is a leased job: its id and fencing token.
type heldJob struct {
	id    string
	token int64
}

// fetchAnswer is the part of a fetch answer the worker reads.
type fetchAnswer struct {
	Jobs []struct {
		ID      string `json:"id"`
		Payload struct {
			T int64 `json:"t"`
		} `json:"payload"`
		Lease struct {
			Token int64 `json:"token"`
		} `json:"lease"`
	} `json:"jobs"`
}

// ackAnswer is the part of a batch ack answer read when an item failed.
type ackAnswer struct {
	Results []struct {
		ID    string `json:"id"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

func newWorker(r *runner) *worker {
	// Each send on done carries at least one held job, so 2 × Concurrency
	// sends never block.
	return &worker{r: r, done: make(chan []heldJob, 2*r.o.Concurrency), wake: make(chan struct{}, 1)}
}

// run runs the fetch and ack loops until ctx ends.
func (w *worker) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.ackLoop(ctx)
	}()
	w.fetchLoop(ctx)
	wg.Wait()
}

// reserve waits until jobs can be fetched and reserves room for as many
// as may be: free slots, within the bound on held jobs and the server's
// fetch bound. It returns 0 when ctx ends.
func (w *worker) reserve(ctx context.Context) int {
	c := w.r.o.Concurrency
	for {
		w.mu.Lock()
		if n := min(c-w.running, 2*c-w.held, maxFetch); n > 0 {
			w.running += n
			w.held += n
			w.mu.Unlock()
			return n
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0
		case <-w.wake:
		}
	}
}

// update changes the counts and wakes the fetch loop.
func (w *worker) update(running, held int) {
	w.mu.Lock()
	w.running += running
	w.held += held
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// busy reports whether any held job is still running.
func (w *worker) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running > 0
}

func (w *worker) fetchLoop(ctx context.Context) {
	var body []byte
	var out bytes.Buffer
	var ans fetchAnswer
	for {
		n := w.reserve(ctx)
		if n == 0 {
			return
		}
		body = w.r.bodies.appendFetch(body[:0], n)
		err := w.r.post(ctx, "/v1/fetch", body, &out, w.r.hFetch, time.Now())
		if err == nil {
			if err = json.Unmarshal(out.Bytes(), &ans); err != nil {
				w.r.countError(fmt.Sprintf("decode fetch answer: %v", err))
			}
		}
		if err != nil {
			w.update(-n, -n)
			if ctx.Err() != nil || !sleepCtx(ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		got := len(ans.Jobs)
		w.update(got-n, got-n)
		if got == 0 {
			continue
		}
		now := time.Now()
		jobs := make([]heldJob, got)
		for i, j := range ans.Jobs {
			if w.r.o.Mode == ModeLatency && j.Payload.T > 0 {
				w.r.hStart.Record(now.Sub(time.Unix(0, j.Payload.T)))
			}
			jobs[i] = heldJob{id: j.ID, token: j.Lease.Token}
		}
		if w.r.o.Work == 0 {
			// Instant handlers: the jobs all finish now, together.
			w.done <- jobs
			w.update(-got, 0)
			continue
		}
		for i := range jobs {
			h := jobs[i : i+1 : i+1]
			time.AfterFunc(w.r.o.Work, func() {
				w.done <- h
				w.update(-1, 0)
			})
		}
	}
}

// ackLoop acks finished jobs: at once when none of the worker's jobs is
// still running, otherwise after at most ackWindow, so that jobs finishing
// close together share one request.
func (w *worker) ackLoop(ctx context.Context) {
	batch := make([]heldJob, 0, 2*w.r.o.Concurrency)
	var body []byte
	var out bytes.Buffer
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time
	for {
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case jobs := <-w.done:
				batch = append(batch, jobs...)
				first = time.Now()
			}
		}
	ready:
		for {
			select {
			case jobs := <-w.done:
				batch = append(batch, jobs...)
			default:
				break ready
			}
		}
		if len(batch) < w.r.o.Concurrency && w.busy() {
			if wait := ackWindow - time.Since(first); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case jobs := <-w.done:
					timer.Stop()
					batch = append(batch, jobs...)
					continue
				case <-timer.C:
				}
			}
		}
		for len(batch) > 0 {
			n := min(len(batch), MaxBatch)
			if !w.ack(ctx, batch[:n], &body, &out) {
				return
			}
			batch = append(batch[:0], batch[n:]...)
		}
	}
}

// ack acks batch in one request and releases its jobs. It returns false
// when ctx ended during the request.
func (w *worker) ack(ctx context.Context, batch []heldJob, body *[]byte, out *bytes.Buffer) bool {
	b := append((*body)[:0], `{"items":[`...)
	for i, j := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = append(b, j.id...)
		b = append(b, `","token":`...)
		b = strconv.AppendInt(b, j.token, 10)
		b = append(b, '}')
	}
	b = append(b, `]}`...)
	*body = b
	acked := int64(len(batch))
	if err := w.r.post(ctx, "/v1/jobs/ack", b, out, w.r.hAck, time.Now()); err != nil {
		if ctx.Err() != nil {
			return false
		}
		acked = 0
	} else if bytes.Contains(out.Bytes(), []byte(`"error"`)) {
		acked -= w.itemErrors(out.Bytes())
	}
	w.r.processed.Add(acked)
	w.r.settled.Add(int64(len(batch)))
	w.update(0, -len(batch))
	w.r.checkDone()
	return true
}

// itemErrors counts (as errors of the run) the items of a batch ack answer
// that failed, and returns how many did.
func (w *worker) itemErrors(answer []byte) int64 {
	var a ackAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		w.r.countError(fmt.Sprintf("decode ack answer: %v", err))
		return 0
	}
	var n int64
	for _, res := range a.Results {
		if res.Error != nil {
			n++
			w.r.countError(fmt.Sprintf("ack %s: %s: %s", res.ID, res.Error.Code, res.Error.Message))
		}
	}
	return n
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
