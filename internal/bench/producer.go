package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
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
	p := loadgen.Producer{Clients: s.clients}
	rem := 0
	if s.jobs > 0 {
		p.Calls = int64((s.jobs + per - 1) / per)
		rem = s.jobs % per
	}
	if s.duration > 0 {
		p.Until = time.Now().Add(s.duration)
	}
	if s.single && r.o.Batcher {
		opts := []client.Option{client.WithHTTPClient(r.client)}
		if r.o.Token != "" {
			opts = append(opts, client.WithToken(r.o.Token))
		}
		if r.stream != nil {
			opts = append(opts, client.WithStream())
		}
		c := client.New(r.base, opts...)
		bat := client.NewBatcher(c, client.BatcherConfig{})
		defer c.CloseIdleConnections()
		defer bat.Close()
		_ = p.Run(ctx, func(int) loadgen.Sender {
			return func(ctx context.Context, c loadgen.Call) error {
				r.enqueueThrough(ctx, bat, r.queueOf(c), s.latency)
				return nil
			}
		})
		return
	}
	_ = p.Run(ctx, func(int) loadgen.Sender {
		var out bytes.Buffer
		return func(ctx context.Context, c loadgen.Call) error {
			q, v := r.queueOf(c), r.offsetOf(c)
			path, body, n := "/v1/jobs/batch", r.bodies.batch[q][v], per
			switch {
			case s.single:
				path, body = "/v1/jobs", r.bodies.single[q][v]
			case rem > 0 && c.Index == p.Calls-1:
				body, n = r.bodies.partial[q][v], rem
			}
			if err := r.post(ctx, path, body, &out, s.latency, time.Now()); err == nil {
				r.enqueued.Add(int64(n))
			}
			return nil
		}
	})
}

// produceAtRate runs the latency mode's open-loop load: single jobs due at
// a fixed rate, each carrying in its payload the time it is measured from
// (loadgen.Call.Due: its send, or its due time when its sender was
// behind), sent by a pool of senders. A slow answer delays the
// measurement, never the schedule.
func (r *runner) produceAtRate(ctx context.Context) {
	pace := newPacer(time.Now(), r.o.Rate, int64(r.o.Jobs), r.o.Duration)
	p := loadgen.Producer{Clients: r.o.Producers, Schedule: pace.Next}
	_ = p.Run(ctx, func(int) loadgen.Sender {
		var out bytes.Buffer
		var body []byte
		return func(ctx context.Context, c loadgen.Call) error {
			body = r.bodies.appendTimed(body[:0], r.queueOf(c), c.Due.UnixNano())
			if err := r.post(ctx, "/v1/jobs", body, &out, r.hEnqueue, c.Due); err == nil {
				r.enqueued.Add(1)
			}
			return nil
		}
	})
}

// queueOf is the queue a call goes to: the queues in turn.
func (r *runner) queueOf(c loadgen.Call) int { return int(c.Index % int64(len(r.queues))) }

// offsetOf is the group offset of a call's body: the offsets in turn,
// each after a round of the queues.
func (r *runner) offsetOf(c loadgen.Call) int {
	return int(c.Index / int64(len(r.queues)) % int64(len(r.bodies.batch[0])))
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
