package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// Rounds of fast inserts shared by concurrent calls; see combiner.

// insertCombined inserts jobs, which canInsertFast accepted, in a round.
// A call refused by a round it shared gets errNotFast with shared set,
// and may try insertFast alone.
func (ins *inserter) insertCombined(ctx context.Context, jobs []store.JobInsertParams, now time.Time) (out []store.InsertResult, shared bool, err error) {
	cb := ins.combine
	c := &combinedCall{ctx: ctx, jobs: jobs, now: now, reply: make(chan combinedReply, 1)}
	select {
	case cb.calls <- c:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	for {
		select {
		case r := <-c.reply:
			return r.out, r.shared, r.err
		case cb.leaders <- struct{}{}:
			led := ins.leadRound()
			<-cb.leaders
			if led == 0 { // another round took this call: wait for it
				select {
				case r := <-c.reply:
					return r.out, r.shared, r.err
				case <-cb.ctx.Done():
					return nil, false, errClosed
				}
			}
		case <-cb.ctx.Done(): // the store closed while the call waited
			return nil, false, errClosed
		}
	}
}

// leadRound takes every call waiting, up to maxFastInsert jobs, inserts
// them together and answers each; it returns how many calls it took. A
// call that would not fit goes in a second round of its own making.
func (ins *inserter) leadRound() int {
	var round []*combinedCall
	n := 0
	for {
		select {
		case c := <-ins.combine.calls:
			if n > 0 && n+len(c.jobs) > maxFastInsert {
				ins.runRound(round)
				ins.runRound([]*combinedCall{c})
				return len(round) + 1
			}
			round = append(round, c)
			n += len(c.jobs)
			if n < maxFastInsert {
				continue
			}
		default:
		}
		if len(round) > 0 {
			ins.runRound(round)
		}
		return len(round)
	}
}

// runRound inserts the jobs of the calls in round together and answers
// each call.
func (ins *inserter) runRound(round []*combinedCall) {
	live := round[:0]
	for _, c := range round {
		if err := c.ctx.Err(); err != nil {
			c.reply <- combinedReply{err: err}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		c := live[0]
		out, err := ins.insertFast(c.ctx, c.jobs, c.now)
		c.reply <- combinedReply{out: out, err: err}
		return
	}
	var jobs []store.JobInsertParams
	for _, c := range live {
		for _, jp := range c.jobs {
			if jp.CreatedAt.IsZero() {
				jp.CreatedAt = c.now // each call's jobs are created at its own time
			}
			jobs = append(jobs, jp)
		}
	}
	var out []store.InsertResult
	err := errNotFast
	if ins.canInsertFast(jobs) {
		out, err = ins.insertFast(ins.combine.ctx, jobs, live[0].now)
	}
	for _, c := range live {
		if err != nil {
			c.reply <- combinedReply{shared: true, err: err}
			continue
		}
		c.reply <- combinedReply{out: out[:len(c.jobs):len(c.jobs)], shared: true}
		out = out[len(c.jobs):]
	}
}

// insertPlain inserts jobs that canInsertFast accepted: in a round with
// other calls, else alone in one round trip; it returns errNotFast when
// only the full insert can.
func (ins *inserter) insertPlain(ctx context.Context, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	out, shared, err := ins.insertCombined(ctx, jobs, now)
	if shared && errors.Is(err, errNotFast) {
		return ins.insertFast(ctx, jobs, now)
	}
	return out, err
}
