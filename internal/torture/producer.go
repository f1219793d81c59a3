package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// producer returns producer idx of the load: each of its calls enqueues a
// single job or a batch with ids of its own, retrying the call until the
// server answers it for sure.
func (l *Load) producer(idx int) loadgen.Sender {
	rng := rand.New(rand.NewPCG(l.cfg.Seed, uint64(idx)+1))
	n := 0
	return func(context.Context, loadgen.Call) error {
		size := 1
		if rng.Float64() < l.cfg.BatchShare {
			size = 2 + rng.IntN(19)
		}
		ps := make([]client.EnqueueParams, size)
		for i := range ps {
			ps[i] = l.jobParams(rng, fmt.Sprintf("%s-p%d-%d", l.cfg.Prefix, idx, n))
			n++
		}
		l.enqueue(ps, size > 1)
		return nil
	}
}

// jobParams is one job of the load.
func (l *Load) jobParams(rng *rand.Rand, id string) client.EnqueueParams {
	p := client.EnqueueParams{
		ID:          id,
		Queue:       l.cfg.Queue,
		Kind:        "torture",
		Payload:     map[string]any{"id": id, "pad": "0123456789abcdef0123456789abcdef"},
		Priority:    rng.IntN(3),
		MaxAttempts: l.cfg.MaxAttempts,
		Lease:       l.cfg.Lease,
	}
	if rng.Float64() < l.cfg.DelayedShare {
		p.Delay = time.Duration(1+rng.IntN(500)) * time.Millisecond
	}
	return p
}

// enqueue sends ps (as a batch when batch is set) until answered for sure,
// recording each attempt for each job.
func (l *Load) enqueue(ps []client.EnqueueParams, batch bool) {
	o, gaveUp := l.retry(func() outcome {
		for _, p := range ps {
			l.h.Add(Event{Op: OpEnqueue, Type: TypeInvoke, Job: p.ID})
		}
		ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
		defer cancel()
		dups := make([]bool, len(ps))
		var err error
		if batch {
			var res []client.EnqueueResult
			res, err = l.c.EnqueueBatch(ctx, ps)
			for i := range res {
				dups[i] = res[i].Duplicate
			}
		} else {
			var res *client.EnqueueResult
			res, err = l.c.Enqueue(ctx, ps[0])
			if res != nil {
				dups[0] = res.Duplicate
			}
		}
		o := classify(err)
		for i, p := range ps {
			e := o.event(Event{Op: OpEnqueue, Job: p.ID})
			e.Duplicate = dups[i]
			l.h.Add(e)
		}
		return o
	})
	switch {
	case gaveUp:
		l.noteGaveUp(OpEnqueue)
	case o.typ != TypeOK:
		l.noteFinal(OpEnqueue, o)
	}
}
