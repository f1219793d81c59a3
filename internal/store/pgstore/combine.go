package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// combiner gathers the fast inserts (insertFast) of concurrent calls into
// shared rounds, each one statement and one commit. A call queues itself
// and then either leads a round, when fewer than combineLeaders are under
// way, taking every call waiting up to maxFastInsert jobs, or waits for
// the round that took it. Every call keeps its own all-or-none: a failed
// round answers each call with its failure, and a refused one
// (errNotFast) sends each call back to insert alone.
type combiner struct {
	calls   chan *combinedCall
	leaders chan struct{}   // one per round under way
	ctx     context.Context // the store's: rounds outlive the calls that lead them
}

// combineLeaders is how many rounds may be under way at once: enough to
// overlap one round's commit with the next one's statement, few enough
// that rounds stay large.
const combineLeaders = 4

// combinedCall is one call of JobInsertMany waiting for a round.
type combinedCall struct {
	ctx   context.Context
	jobs  []store.JobInsertParams
	now   time.Time
	reply chan combinedReply
}

// combinedReply answers a call; shared is set when it went in a round
// with others.
type combinedReply struct {
	out    []store.InsertResult
	shared bool
	err    error
}

func newCombiner(ctx context.Context) *combiner {
	return &combiner{calls: make(chan *combinedCall, 4096), leaders: make(chan struct{}, combineLeaders), ctx: ctx}
}

// insertPlain inserts jobs that canInsertFast accepted: in a round with
// other calls, else alone in one round trip; it returns errNotFast when
// only the full insert can.
func (ins *inserter) insertPlain(ctx context.Context, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	cb := ins.combine
	c := &combinedCall{ctx: ctx, jobs: jobs, now: now, reply: make(chan combinedReply, 1)}
	select {
	case cb.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var r combinedReply
wait:
	for {
		select {
		case r = <-c.reply:
			break wait
		case cb.leaders <- struct{}{}:
			led := ins.leadRound()
			<-cb.leaders
			if led == 0 { // another round took this call: wait for it
				select {
				case r = <-c.reply:
					break wait
				case <-cb.ctx.Done():
					return nil, errClosed
				}
			}
		case <-cb.ctx.Done(): // the store closed while the call waited
			return nil, errClosed
		}
	}
	if r.shared && errors.Is(r.err, errNotFast) {
		return ins.insertFast(ctx, jobs, now) // the shared round was refused: try alone
	}
	return r.out, r.err
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

// runRound inserts the jobs of round's calls together and answers each.
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
