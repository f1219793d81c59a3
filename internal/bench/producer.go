package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/client"
)

// produceSpec is one closed-loop enqueue load: clients each send a request
// as soon as their previous one is answered.
type produceSpec struct {
	jobs     int           // total jobs; 0 means until the deadline
	duration time.Duration // 0 means until jobs are sent
	clients  int
	batch    int
	single   bool       // POST /v1/jobs with one job, not the batch route
	latency  *Histogram // nil records nothing (the prefill)
}

// produce runs a closed-loop enqueue load and returns when it is complete
// or ctx ends. Requests are spread over the queues in turn. A failed
// request is counted and its jobs are not; the load goes on, so the run
// stays bounded by its request count.
func (r *runner) produce(ctx context.Context, s produceSpec) {
	per := s.batch
	if s.single {
		per = 1
	}
	var requests int64 = -1
	if s.jobs > 0 {
		requests = int64((s.jobs + per - 1) / per)
	}
	rem := 0
	if s.jobs > 0 {
		rem = s.jobs % per
	}
	var deadline time.Time
	if s.duration > 0 {
		deadline = time.Now().Add(s.duration)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var bat *client.Batcher
	if s.single && r.o.Batcher {
		opts := []client.Option{client.WithHTTPClient(r.client)}
		if r.o.Token != "" {
			opts = append(opts, client.WithToken(r.o.Token))
		}
		if r.stream != nil {
			opts = append(opts, client.WithStream())
		}
		c := client.New(r.base, opts...)
		bat = client.NewBatcher(c, client.BatcherConfig{})
		defer c.CloseIdleConnections()
		defer bat.Close()
	}
	for c := 0; c < s.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if requests >= 0 && i >= requests {
					return
				}
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				q := int(i % int64(len(r.queues)))
				if bat != nil {
					r.enqueueThrough(ctx, bat, q, s.latency)
					continue
				}
				path, body, n := "/v1/jobs/batch", r.bodies.batch[q], per
				switch {
				case s.single:
					path, body = "/v1/jobs", r.bodies.single[q]
				case rem > 0 && i == requests-1:
					body, n = r.bodies.partial[q], rem
				}
				if err := r.post(ctx, path, body, &out, s.latency, time.Now()); err != nil {
					continue
				}
				r.enqueued.Add(int64(n))
			}
		}()
	}
	wg.Wait()
}

// produceAtRate runs the latency mode's open-loop load: single jobs due at
// a fixed rate, each carrying its due time in its payload, sent by a pool
// of senders. Request latency is measured from the due time, so a slow
// answer delays the measurement, never the schedule.
func (r *runner) produceAtRate(ctx context.Context) {
	p := newPacer(time.Now(), r.o.Rate, int64(r.o.Jobs), r.o.Duration)
	var wg sync.WaitGroup
	for c := 0; c < r.o.Producers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			var body []byte
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for ctx.Err() == nil {
				i, at, ok := p.Next()
				if !ok {
					return
				}
				if d := time.Until(at); d > 0 {
					timer.Reset(d)
					select {
					case <-ctx.Done():
						return
					case <-timer.C:
					}
				}
				q := int(i % int64(len(r.queues)))
				body = r.bodies.appendTimed(body[:0], q, at.UnixNano())
				if err := r.post(ctx, "/v1/jobs", body, &out, r.hEnqueue, at); err != nil {
					continue
				}
				r.enqueued.Add(1)
			}
		}()
	}
	wg.Wait()
}

// enqueueThrough enqueues one job of queue q through the Batcher, timing
// the call as a request.
func (r *runner) enqueueThrough(ctx context.Context, bat *client.Batcher, q int, h *Histogram) {
	start := time.Now()
	_, err := bat.Enqueue(ctx, client.EnqueueParams{Queue: r.queues[q], Kind: "bench", Payload: r.bodies.payload,
		Durability: client.Durability(r.o.Durability)})
	if err != nil {
		_ = r.fail(ctx, fmt.Errorf("enqueue through the batcher: %w", err))
		return
	}
	if h != nil {
		h.Record(time.Since(start))
	}
	r.enqueued.Add(1)
	if r.inWindow.Load() {
		r.requests.Add(1)
	}
}
