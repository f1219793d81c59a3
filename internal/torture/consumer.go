package torture

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// fetchWait is the consumers' long poll.
const fetchWait = 500 * time.Millisecond

// consumerFetch is the most jobs a consumer fetches at once.
const consumerFetch = 10

// consumer returns consumer idx of the load: it fetches 1 to 10 jobs at a
// time and acks, fails or extends-then-acks each, until stopConsume
// closes.
func (l *Load) consumer(idx int) loadgen.Worker[*client.Job] {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, uint64(1000+idx)))
	return loadgen.Worker[*client.Job]{
		Concurrency: consumerFetch,
		Stop:        l.stopConsume,
		Fetch: func(_ context.Context, most int) ([]*client.Job, error) {
			jobs, err := l.fetch(client.FetchParams{Max: 1 + rng.IntN(most)})
			if err != nil {
				loadgen.Sleep(l.ctx, minRetry+rand.N(maxRetry))
			}
			return jobs, err
		},
		Ack: func(_ context.Context, jobs []*client.Job) error {
			l.settleAll(rng, jobs)
			return nil
		},
	}
}

// settleAll settles each of jobs as rng chooses: a fail with a retry, an
// extend and an ack, a single ack, or an ack in one batch with the others
// so chosen.
func (l *Load) settleAll(rng *rand.Rand, jobs []*client.Job) {
	var acks []client.AckItem
	for _, j := range jobs {
		switch r := rng.Float64(); {
		case r < l.cfg.FailShare:
			l.fail(j, time.Duration(10+rng.IntN(90))*time.Millisecond)
		case r < l.cfg.FailShare+l.cfg.ExtendShare:
			l.extend(j)
			l.ack(j)
		case rng.IntN(2) == 0:
			l.ack(j)
		default:
			acks = append(acks, client.AckItem{ID: j.ID, Token: j.Token()})
		}
	}
	if len(acks) > 0 {
		l.ackBatch(acks)
	}
}

// slowConsumer returns the load's slow consumer: it leases one job at a
// time with a short lease, lets the lease run out past the server's
// rescue bound, and then acks with the stale token: the ack must be
// refused once the job went to another consumer.
func (l *Load) slowConsumer() loadgen.Worker[*client.Job] {
	hold := l.cfg.SlowLease + 1500*time.Millisecond
	return loadgen.Worker[*client.Job]{
		Concurrency: 1,
		Work:        hold,
		Stop:        l.stopConsume,
		Fetch: func(context.Context, int) ([]*client.Job, error) {
			jobs, err := l.fetch(client.FetchParams{Max: 1, Lease: l.cfg.SlowLease})
			switch {
			case err != nil:
				loadgen.Sleep(l.ctx, maxRetry)
			case len(jobs) == 0:
				loadgen.Sleep(l.ctx, hold)
			}
			for _, j := range jobs {
				l.h.Add(Event{Op: OpAbandon, Type: TypeOK, Job: j.ID, Token: j.Token()})
			}
			return jobs, err
		},
		Ack: func(_ context.Context, jobs []*client.Job) error {
			for _, j := range jobs {
				l.ack(j)
			}
			return nil
		},
	}
}

// fetch leases jobs and records each hand-out.
func (l *Load) fetch(p client.FetchParams) ([]*client.Job, error) {
	p.Queues = []string{l.cfg.Queue}
	p.Wait = fetchWait
	p.Worker = "torture"
	ctx, cancel := context.WithTimeout(l.ctx, fetchWait+callTimeout)
	defer cancel()
	jobs, err := l.c.Fetch(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		l.h.Add(Event{Op: OpFetch, Type: TypeOK, Job: j.ID, Token: j.Token(), Attempt: j.Attempt})
	}
	return jobs, nil
}

// settle sends one lease call until it is answered for sure.
func (l *Load) settle(op Op, j *client.Job, retry bool, call func(ctx context.Context) (string, error)) {
	o, gaveUp := l.retry(func() outcome {
		l.h.Add(Event{Op: op, Type: TypeInvoke, Job: j.ID, Token: j.Token(), Retry: retry})
		ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
		defer cancel()
		state, err := call(ctx)
		o := classify(err)
		e := o.event(Event{Op: op, Job: j.ID, Token: j.Token(), Retry: retry})
		e.State = state
		l.h.Add(e)
		return o
	})
	switch {
	case gaveUp:
		l.noteGaveUp(op)
	case o.typ != TypeOK:
		l.noteFinal(op, o)
	}
}

func (l *Load) ack(j *client.Job) {
	l.settle(OpAck, j, false, func(ctx context.Context) (string, error) {
		res, err := l.c.Ack(ctx, j.ID, j.Token(), map[string]int64{"token": j.Token()})
		if err != nil {
			return "", err
		}
		return string(res.State), nil
	})
}

func (l *Load) fail(j *client.Job, after time.Duration) {
	l.settle(OpFail, j, true, func(ctx context.Context) (string, error) {
		res, err := l.c.Fail(ctx, j.ID, j.Token(), client.FailParams{Error: "torture failure", RetryAfter: after})
		if err != nil {
			return "", err
		}
		return string(res.State), nil
	})
}

func (l *Load) extend(j *client.Job) {
	l.settle(OpExtend, j, false, func(ctx context.Context) (string, error) {
		_, err := l.c.Extend(ctx, j.ID, j.Token(), 0)
		return "", err
	})
}

// ackBatch acks items in one call, recording one event per item, and
// retries the items whose outcome calls for it.
func (l *Load) ackBatch(items []client.AckItem) {
	o, gaveUp := l.retry(func() outcome {
		for _, it := range items {
			l.h.Add(Event{Op: OpAck, Type: TypeInvoke, Job: it.ID, Token: it.Token})
		}
		ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
		defer cancel()
		res, err := l.c.AckBatch(ctx, items)
		o := classify(err)
		var again []client.AckItem
		for i, it := range items {
			e := o.event(Event{Op: OpAck, Job: it.ID, Token: it.Token})
			if err == nil {
				io := classify(res[i].Err)
				e = io.event(Event{Op: OpAck, Job: it.ID, Token: it.Token, State: string(res[i].State)})
				if io.retryable() {
					again = append(again, it)
				} else if io.typ != TypeOK {
					l.noteFinal(OpAck, io)
				}
			}
			l.h.Add(e)
		}
		if err == nil && len(again) > 0 {
			items = again
			return outcome{typ: TypeInfo}
		}
		return o
	})
	switch {
	case gaveUp:
		l.noteGaveUp(OpAck)
	case o.typ != TypeOK && o.typ != TypeInfo:
		l.noteFinal(OpAck, o)
	}
}
