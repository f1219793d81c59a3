package sqlitestore

import (
	"context"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// JobTransact acknowledges, fails and inserts in one operation of the
// writer, and so in one SQL transaction; see store.Transactor.
//
// The writer runs operations without savepoints, so the operation checks
// every item before it writes anything; once it writes, any later refusal
// (an id of another queue among the inserts) rolls the whole transaction
// back, and the writer takes back its leases and windows as for any
// failed operation.
func (s *Store) JobTransact(ctx context.Context, p *store.JobTransactParams) (*store.TransactResult, error) {
	res := sqlkit.NewTransactResult(p)
	res.Inserted = make([]store.InsertResult, len(p.Insert))
	acksRelaxed := leasesRelaxed(p.Complete, store.CompleteKey)
	failsRelaxed := leasesRelaxed(p.Fail, store.FailKey)
	relaxed := func(w *writer) bool {
		return len(p.Create) == 0 && store.Relaxed(p.Insert) && acksRelaxed(w) && failsRelaxed(w)
	}
	weight := len(p.Complete) + len(p.Fail) + len(p.Insert)
	err := s.doRelaxed(ctx, weight, relaxed, func(w *writer) error {
		held, err := w.holdAll(p)
		if err != nil {
			return err
		}
		if err := w.checkInserts(p.Insert); err != nil {
			return sqlkit.RenameInserts(err)
		}
		// From here on a refusal must roll back what was written.
		w.touched = true
		if err := w.createQueues(p.Create); err != nil {
			return err
		}
		now := p.Now.UTC()
		acks := completions{w: w}
		for i := range p.Complete {
			if err := acks.ack(held[i], p.Complete[i].Result, now.UnixNano(), &res.Completed[i]); err != nil {
				return err
			}
		}
		if err := acks.flush(); err != nil {
			return err
		}
		for i := range p.Fail {
			if err := w.failAttempt(&p.Fail[i], held[len(p.Complete)+i], now, p.Rand, &res.Failed[i]); err != nil {
				return err
			}
		}
		return sqlkit.RenameInserts(w.insertJobs(p.Insert, now, res.Inserted))
	})
	if err != nil {
		return nil, wrap("transact", err)
	}
	return res, nil
}

// holdAll returns the leases that the ack and fail items of p hold, in
// item order, or the refusal of the first item that holds none: a job
// that does not exist, a token that is not current, or a job that an
// earlier item names already (its lease is that item's to end). It writes
// nothing.
func (w *writer) holdAll(p *store.JobTransactParams) ([]*lease, error) {
	held := make([]*lease, len(p.Complete)+len(p.Fail))
	seen := make(map[string]bool, len(held))
	for i := range held {
		id, token := sqlkit.TransactLease(p, i)
		var l *lease
		miss, err := error(job.ErrLeaseLost), error(nil)
		if !seen[id] {
			l, miss, err = w.holder(id, token)
		}
		seen[id] = true
		if err != nil {
			return nil, err
		}
		if miss != nil {
			return nil, sqlkit.TransactMiss(p, i, miss)
		}
		held[i] = l
	}
	return held, nil
}
