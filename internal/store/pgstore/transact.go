package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// transactor acknowledges, fails and inserts in one transaction.
type transactor struct {
	*db
	*beliefs
	fin *finisher
	ins *inserter
}

// sqlStrictCommit makes the transaction it runs in wait for the WAL flush
// at its commit, as the server's setting has it, whatever an earlier
// statement of the transaction set (see sqlRelaxCommit).
const sqlStrictCommit = `SET LOCAL synchronous_commit TO DEFAULT`

// JobTransact acknowledges, fails and inserts in one transaction; see
// store.Transactor. It locks the leased jobs of its ack and fail items
// first, in seq order (as every call that ends leases does, so that two
// never wait on each other in a cycle), refuses the first item that holds
// no lease, then runs the statements of queue creation (create.go),
// JobComplete, JobFail and JobInsertMany. Its commit skips the WAL flush
// only when every job it wrote is of process durability.
func (t *transactor) JobTransact(ctx context.Context, p *store.JobTransactParams) (*store.TransactResult, error) {
	if err := checkInserts(p.Insert); err != nil {
		return nil, fmt.Errorf("transact: %w", sqlkit.RenameInserts(err))
	}
	it := attempt.NewBatch(len(p.Complete)+len(p.Fail), func(i int) (string, int64) { return sqlkit.TransactLease(p, i) })
	now := micro(p.Now)
	var res *store.TransactResult
	err := t.tx(ctx, func(tx pgx.Tx) error {
		res = sqlkit.NewTransactResult(p)
		held, err := holdAll(ctx, tx, it, p)
		if err != nil {
			return err
		}
		relaxed := len(p.Create) == 0 && store.Relaxed(p.Insert)
		for _, l := range held {
			relaxed = relaxed && l.durability == job.DurabilityProcess
		}
		if err := t.ins.createQueues(ctx, tx, p.Create); err != nil {
			return err
		}
		if err := t.transactAcks(ctx, tx, p, now, res.Completed); err != nil {
			return err
		}
		if err := t.transactFails(ctx, tx, p, held[len(p.Complete):], now, res.Failed); err != nil {
			return err
		}
		if len(p.Insert) > 0 {
			if res.Inserted, err = t.ins.insert(ctx, tx, p.Insert, now, false); err != nil {
				return sqlkit.RenameInserts(err)
			}
		}
		commit := sqlStrictCommit
		if relaxed {
			commit = sqlRelaxCommit
		}
		if _, err := tx.Exec(ctx, commit); err != nil {
			return fmt.Errorf("set the commit's durability: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("transact", err)
	}
	return res, nil
}

// holdAll locks the jobs whose leases the items of it, those of p, hold
// and returns them in item order, or the refusal of the first item that
// holds none: an unknown job, a token that is not current, or a job an
// earlier item names already.
func holdAll(ctx context.Context, tx pgx.Tx, it *attempt.Batch, p *store.JobTransactParams) ([]*leased, error) {
	locked, err := lockLeased(ctx, tx, it, false)
	if err != nil {
		return nil, err
	}
	held := make([]*leased, it.Len())
	matched := make([]bool, len(it.IDs))
	for k, i := range it.Pos {
		if l := locked[k]; l != nil {
			held[i], matched[k] = l, true
		}
	}
	misses := make([]job.Outcome, len(held))
	if err := settle(ctx, tx, it, misses, matched); err != nil {
		return nil, err
	}
	for i, o := range misses {
		if o.Err != nil {
			return nil, sqlkit.TransactMiss(p, i, o.Err)
		}
	}
	return held, nil
}

// transactAcks acknowledges the jobs of p.Complete, whose leases are
// locked and current, and fills out.
func (t *transactor) transactAcks(ctx context.Context, tx pgx.Tx, p *store.JobTransactParams, now time.Time, out []job.Outcome) error {
	if len(p.Complete) == 0 {
		return nil
	}
	it := attempt.NewBatch(len(p.Complete), func(i int) (string, int64) { return store.CompleteKey(&p.Complete[i]) })
	results := make([][]byte, len(p.Complete))
	for i := range p.Complete {
		results[i] = bytesOrNil(p.Complete[i].Result)
	}
	matched, err := t.fin.complete(ctx, tx, it, results, now, out)
	if err != nil {
		return fmt.Errorf("complete jobs: %w", err)
	}
	if n := len(slices.DeleteFunc(matched, func(ok bool) bool { return !ok })); n != len(p.Complete) {
		return fmt.Errorf("complete jobs: %d of %d locked jobs acknowledged", n, len(p.Complete))
	}
	return nil
}

// transactFails ends the attempts of p.Fail, whose jobs held are locked,
// where job.AfterFailure sends them, and fills out.
func (t *transactor) transactFails(ctx context.Context, tx pgx.Tx, p *store.JobTransactParams, held []*leased, now time.Time, out []job.Outcome) error {
	if len(p.Fail) == 0 {
		return nil
	}
	changes := make([]change, len(p.Fail))
	for i := range p.Fail {
		changes[i] = held[i].changeOf(failEnd(&p.Fail[i], held[i], now, p.Rand))
		out[i] = store.EndOutcome(&held[i].Held, &changes[i].end)
	}
	return t.fin.endAll(ctx, tx, changes, now, func(i int, ref job.JobRef) { out[i].DeadLetter = ref })
}
