package torture

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/client"
)

// prober sends single calls to a server whose disk is failing, without
// retrying them, and records each in a history with how long its answer
// took.
type prober struct {
	c      *client.Client
	h      *History
	queue  string
	prefix string // starts the ids of its jobs; defaults to "probe"
	n      int
}

// answer is one probe's outcome and latency.
type answer struct {
	outcome
	took time.Duration
}

// String is "507 storage_full", "201" or "unknown" and the like.
func (a answer) String() string {
	switch {
	case a.typ == TypeOK:
		return "2xx"
	case a.typ == TypeInfo:
		return "unknown"
	case a.status == 0:
		return "no connection"
	}
	return fmt.Sprintf("%d %s", a.status, a.code)
}

// enqueue enqueues jobs with fresh ids and payloads of pad bytes, as one
// batch when there is more than one.
func (p *prober) enqueue(ctx context.Context, jobs, pad int) answer {
	ps := make([]client.EnqueueParams, jobs)
	for i := range ps {
		p.n++
		ps[i] = client.EnqueueParams{
			ID: fmt.Sprintf("%s-%d", cmp.Or(p.prefix, "probe"), p.n), Queue: p.queue, Kind: "probe",
			Payload: map[string]any{"n": p.n, "pad": padding(pad)},
		}
		p.h.Add(Event{Op: OpEnqueue, Type: TypeInvoke, Job: ps[i].ID})
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	began := time.Now()
	var err error
	if jobs == 1 {
		_, err = p.c.Enqueue(ctx, ps[0])
	} else {
		_, err = p.c.EnqueueBatch(ctx, ps)
	}
	a := answer{outcome: classify(err), took: time.Since(began)}
	for _, jp := range ps {
		p.h.Add(a.event(Event{Op: OpEnqueue, Job: jp.ID}))
	}
	return a
}

// fetch leases up to max jobs for lease and records the hand-outs, which
// it abandons: their leases run out.
func (p *prober) fetch(ctx context.Context, max int, lease time.Duration) answer {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	began := time.Now()
	jobs, err := p.c.Fetch(ctx, client.FetchParams{Queues: []string{p.queue}, Max: max, Lease: lease})
	a := answer{outcome: classify(err), took: time.Since(began)}
	for _, j := range jobs {
		p.h.Add(Event{Op: OpFetch, Type: TypeOK, Job: j.ID, Token: j.Token(), Attempt: j.Attempt})
		p.h.Add(Event{Op: OpAbandon, Type: TypeOK, Job: j.ID, Token: j.Token()})
	}
	return a
}

// drain fetches and acks the queue's jobs, recording every call, until a
// fetch finds none or limit passes.
func (p *prober) drain(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, callTimeout)
		jobs, err := p.c.Fetch(fctx, client.FetchParams{Queues: []string{p.queue}, Max: 1000, Wait: 2 * time.Second})
		cancel()
		if err != nil {
			return fmt.Errorf("drain %s: %w", p.queue, err)
		}
		if len(jobs) == 0 {
			return nil
		}
		items := make([]client.AckItem, len(jobs))
		for i, j := range jobs {
			p.h.Add(Event{Op: OpFetch, Type: TypeOK, Job: j.ID, Token: j.Token(), Attempt: j.Attempt})
			p.h.Add(Event{Op: OpAck, Type: TypeInvoke, Job: j.ID, Token: j.Token()})
			items[i] = client.AckItem{ID: j.ID, Token: j.Token()}
		}
		actx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := p.c.AckBatch(actx, items)
		cancel()
		if err != nil {
			return fmt.Errorf("drain %s: %w", p.queue, err)
		}
		for i, r := range res {
			p.h.Add(classify(r.Err).event(Event{Op: OpAck, Job: items[i].ID, Token: items[i].Token, State: string(r.State)}))
		}
	}
	return fmt.Errorf("drain %s: jobs still coming after %v", p.queue, limit)
}

// padding returns n bytes of filler.
func padding(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}
