package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// combiner gathers the fast inserts (insertFast) of concurrent calls into
// one: a few senders each take every call waiting, up to maxFastInsert
// jobs, and insert them together, in one statement and one commit. Calls
// that come while the senders are busy wait for the next round, so the
// rounds grow with the load: with one caller, each call goes alone; with
// fifty, a round carries many of them for the cost of a few.
//
// Every call keeps its own all-or-none: a round that fails leaves nothing
// written and answers each of its calls with the failure, and a round that
// the fast insert refuses (errNotFast, say because one call's id exists)
// sends each of its calls back to insert alone.
type combiner struct {
	calls   chan *combinedCall
	stopped <-chan struct{} // closed when the store closes
}

// combineSenders is how many rounds may be under way at once: enough to
// overlap one round's commit with the next round's statement, few enough
// that rounds stay large and the pool keeps connections for the rest.
const combineSenders = 4

// combinedCall is one call of JobInsertMany waiting for a round.
type combinedCall struct {
	ctx   context.Context
	jobs  []store.JobInsertParams
	now   time.Time
	reply chan combinedReply
}

type combinedReply struct {
	out []store.InsertResult
	// alone is set when the call went in a round with others.
	alone bool
	err   error
}

func newCombiner(stopped <-chan struct{}) *combiner {
	return &combiner{calls: make(chan *combinedCall, 4096), stopped: stopped}
}

// insertCombined inserts jobs, which canInsertFast accepted, in the next
// round. A call refused by a round it shared gets errNotFast with
// shared set, and may try insertFast alone.
func (s *Store) insertCombined(ctx context.Context, jobs []store.JobInsertParams, now time.Time) (out []store.InsertResult, shared bool, err error) {
	c := &combinedCall{ctx: ctx, jobs: jobs, now: now, reply: make(chan combinedReply, 1)}
	select {
	case s.combine.calls <- c:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	select {
	case r := <-c.reply: // a sender answers every call it took
		return r.out, !r.alone, r.err
	case <-s.combine.stopped: // the store closed: no sender may take it
		return nil, false, errClosed
	}
}

// combineLoop is one sender: it runs rounds until ctx ends, then answers
// the calls left with errClosed.
func (s *Store) combineLoop(ctx context.Context) {
	var round []*combinedCall
	for {
		select {
		case <-ctx.Done():
			for {
				select {
				case c := <-s.combine.calls:
					c.reply <- combinedReply{alone: true, err: errClosed}
				default:
					return
				}
			}
		case c := <-s.combine.calls:
			round = append(round[:0], c)
		}
		n := len(round[0].jobs)
	gather:
		for n < maxFastInsert {
			select {
			case c := <-s.combine.calls:
				if n+len(c.jobs) > maxFastInsert {
					s.runRound(ctx, round)
					round, n = append(round[:0], c), len(c.jobs)
					continue
				}
				round = append(round, c)
				n += len(c.jobs)
			default:
				break gather
			}
		}
		s.runRound(ctx, round)
		clear(round)
	}
}

// runRound inserts the jobs of the calls in round together and answers
// each call.
func (s *Store) runRound(ctx context.Context, round []*combinedCall) {
	live := round[:0]
	for _, c := range round {
		if err := c.ctx.Err(); err != nil {
			c.reply <- combinedReply{alone: true, err: err}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		c := live[0]
		out, err := s.insertFast(c.ctx, c.jobs, c.now)
		c.reply <- combinedReply{out: out, alone: true, err: err}
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
	if s.canInsertFast(jobs) {
		out, err = s.insertFast(ctx, jobs, live[0].now)
	}
	for _, c := range live {
		if err != nil {
			c.reply <- combinedReply{err: err}
			continue
		}
		c.reply <- combinedReply{out: out[:len(c.jobs):len(c.jobs)]}
		out = out[len(c.jobs):]
	}
}

// insertPlain inserts jobs that canInsertFast accepted: in a round with
// other calls, else alone in one round trip; it returns errNotFast when
// only the full insert can.
func (s *Store) insertPlain(ctx context.Context, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	out, shared, err := s.insertCombined(ctx, jobs, now)
	if shared && errors.Is(err, errNotFast) {
		return s.insertFast(ctx, jobs, now)
	}
	return out, err
}
