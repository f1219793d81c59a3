package sqlitestore

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// JobTransact acknowledges, fails and inserts in one operation of the
// writer, and so in one SQL transaction; see store.Transactor.
//
// The writer runs operations without savepoints, so the operation checks
// every ack and fail item before it writes anything: a refused item
// leaves the batch's transaction clean, as a refused ack does. Once it
// writes, it counts as having touched the writer's state, so that any
// later refusal (an id of another queue among the inserts) rolls the
// whole transaction back: the writer then takes back the leases it ended
// from the batch's undo log and rebuilds its windows from the database,
// and the counts never see the operation's changes.
func (s *Store) JobTransact(ctx context.Context, p *store.JobTransactParams) (*store.TransactResult, error) {
	res := &store.TransactResult{
		Completed: make([]job.Outcome, len(p.Complete)),
		Failed:    make([]job.Outcome, len(p.Fail)),
		Inserted:  make([]store.InsertResult, len(p.Insert)),
	}
	acksRelaxed := leasesRelaxed(p.Complete, store.CompleteKey)
	failsRelaxed := leasesRelaxed(p.Fail, store.FailKey)
	relaxed := func(w *writer) bool {
		return len(p.Create) == 0 && store.Relaxed(p.Insert) && acksRelaxed(w) && failsRelaxed(w)
	}
	weight := len(p.Complete) + len(p.Fail) + len(p.Insert)
	err := s.doRelaxed(ctx, weight, relaxed, func(w *writer) error {
		acked, failed, err := w.holdAll(p)
		if err != nil {
			return err
		}
		if err := w.checkInserts(p.Insert); err != nil {
			return job.RenameItems(err, "jobs", "enqueue")
		}
		// From here on a refusal must roll back what was written.
		w.touched = true
		if err := w.createQueues(p.Create); err != nil {
			return err
		}
		now := p.Now.UTC()
		acks := completions{w: w}
		for i, l := range acked {
			if err := acks.ack(l, p.Complete[i].Result, now.UnixNano(), &res.Completed[i]); err != nil {
				return err
			}
		}
		if err := acks.flush(); err != nil {
			return err
		}
		for i, l := range failed {
			if err := w.failAttempt(&p.Fail[i], l, now, p.Rand, &res.Failed[i]); err != nil {
				return err
			}
		}
		if err := w.insertJobs(p.Insert, now, res.Inserted); err != nil {
			return job.RenameItems(err, "jobs", "enqueue")
		}
		return nil
	})
	if err != nil {
		return nil, wrap("transact", err)
	}
	return res, nil
}

// holdAll returns the leases that the ack and fail items of p hold, in
// item order, or the *job.ItemError of the first item that holds none: a
// job that does not exist, a token that is not current, or a job that an
// earlier item names already (its lease is that item's to end). It writes
// nothing.
func (w *writer) holdAll(p *store.JobTransactParams) (acked, failed []*lease, err error) {
	seen := make(map[string]bool, len(p.Complete)+len(p.Fail))
	hold := func(list string, i int, id string, token int64) (*lease, error) {
		item := fmt.Sprintf("%s[%d]", list, i)
		if seen[id] {
			return nil, &job.ItemError{Field: item + ".token", Err: job.ErrLeaseLost}
		}
		seen[id] = true
		l, miss, err := w.holder(id, token)
		if err != nil {
			return nil, err
		}
		if miss != nil {
			return nil, &job.ItemError{Field: job.MissField(item, miss), Err: miss}
		}
		return l, nil
	}
	acked = make([]*lease, len(p.Complete))
	for i := range p.Complete {
		if acked[i], err = hold("ack", i, p.Complete[i].ID, p.Complete[i].Token); err != nil {
			return nil, nil, err
		}
	}
	failed = make([]*lease, len(p.Fail))
	for i := range p.Fail {
		if failed[i], err = hold("fail", i, p.Fail[i].ID, p.Fail[i].Token); err != nil {
			return nil, nil, err
		}
	}
	return acked, failed, nil
}
