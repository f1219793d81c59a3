package tiered

import (
	"context"
	"errors"
	"fmt"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// A transaction is atomic within one store, so it runs in one tier: the
// tier of the jobs it acknowledges, fails and inserts. A transaction whose
// items live in both tiers cannot be atomic, and is refused.

// JobTransact runs the transaction in the tier its items live in; see
// store.Transactor. Its inserts have ids one space across both tiers, as
// JobInsertMany's do (see ids.go). A transaction that names a job of each
// tier (a memory job and a durable one, to acknowledge, fail or insert) is
// refused with a *job.InputError naming the first item of the other tier
// than its first item's, and changes nothing. The queues it creates
// (p.Create) are created in the durable tier, in the transaction when it
// runs there and before it when it runs in the memory tier (so that a
// memory transaction refused may leave them created), and the memory
// tier then takes their configuration.
func (s *Store) JobTransact(ctx context.Context, p *store.JobTransactParams) (*store.TransactResult, error) {
	res, err := s.transact(ctx, p)
	if err != nil || len(p.Create) == 0 {
		return res, err
	}
	return res, s.mirrorCreated(ctx, p.Create, p.Now)
}

// transact is JobTransact but for the memory tier's copy of the
// configuration of the queues it creates.
func (s *Store) transact(ctx context.Context, p *store.JobTransactParams) (*store.TransactResult, error) {
	if !s.used.Load() && !memoryInserts(p.Insert) {
		s.gate.RLock()
		if !s.used.Load() {
			defer s.gate.RUnlock()
			return s.disk.JobTransact(ctx, p)
		}
		s.gate.RUnlock()
	}
	memory, err := s.transactionTier(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("transact: %w", err)
	}
	var to, other Tier = s.disk, s.mem
	if memory {
		to, other = s.mem, s.disk
		if len(p.Create) > 0 {
			if _, err := s.disk.JobInsertMany(ctx, &store.JobInsertManyParams{Create: p.Create, Now: p.Now}); err != nil {
				return nil, fmt.Errorf("transact: %w", err)
			}
			q := *p
			q.Create = nil
			p = &q
		}
	}
	if len(p.Insert) == 0 {
		res, err := to.JobTransact(ctx, p)
		return res, s.lateMemoryItem(ctx, p, memory, err)
	}
	if memoryInserts(p.Insert) {
		s.useMemory()
	}
	var res *store.TransactResult
	inserted, err := s.guarded(ctx, p.Insert, "enqueue", other, memory, true, func(rest []store.JobInsertParams) ([]store.InsertResult, error) {
		q := *p
		q.Insert = rest
		var err error
		if res, err = to.JobTransact(ctx, &q); err != nil {
			return nil, err
		}
		return res.Inserted, nil
	})
	if err != nil {
		return nil, s.lateMemoryItem(ctx, p, memory, err)
	}
	res.Inserted = inserted
	return res, nil
}

// memoryInserts reports whether any of jobs is of memory durability.
func memoryInserts(jobs []store.JobInsertParams) bool {
	for i := range jobs {
		if jobs[i].Durability == job.DurabilityMemory {
			return true
		}
	}
	return false
}

// item is one item of a transaction, as tiers see it.
type item struct {
	// field names the item's job: "ack[0].id", "enqueue[2].durability".
	field string
	// id is the job id of an ack or fail item; empty for an insert.
	id string
	// tier is where the item's job lives: tierMemory, tierDurable, or
	// tierNone for an ack or fail of a job neither tier holds active
	// (unknown, or a memory job that is no longer active), which the
	// transaction's own tier refuses.
	tier int
}

const (
	tierNone = iota
	tierMemory
	tierDurable
)

// transactionTier reports whether p runs in the memory tier: the tier of
// its first item that has one. An ack or fail item's job lies in the
// memory tier while it is active there, and in the durable one when the
// durable store holds it; an insert's lies where its durability puts it.
// An item of the other tier is a *job.InputError naming it.
func (s *Store) transactionTier(ctx context.Context, p *store.JobTransactParams) (bool, error) {
	items := make([]item, 0, len(p.Complete)+len(p.Fail)+len(p.Insert))
	var lookup []string // ack and fail jobs not active in the memory tier
	anyMemory := false
	leased := func(list string, i int, id string) {
		it := item{field: fmt.Sprintf("%s[%d].id", list, i), id: id}
		if s.mem.Active(id) {
			it.tier, anyMemory = tierMemory, true
		} else {
			lookup = append(lookup, id)
		}
		items = append(items, it)
	}
	for i := range p.Complete {
		leased("ack", i, p.Complete[i].ID)
	}
	for i := range p.Fail {
		leased("fail", i, p.Fail[i].ID)
	}
	for i := range p.Insert {
		it := item{field: fmt.Sprintf("enqueue[%d].durability", i), tier: tierDurable}
		if p.Insert[i].Durability == job.DurabilityMemory {
			it.tier, anyMemory = tierMemory, true
		}
		items = append(items, it)
	}
	if !anyMemory {
		return false, nil
	}
	// Some item is a memory one: the others must be too, or name jobs that
	// neither tier holds active.
	var durable map[string]*job.Job
	if len(lookup) > 0 {
		var err error
		if durable, err = s.disk.JobGetMany(ctx, lookup); err != nil {
			return false, fmt.Errorf("look up jobs in the durable tier: %w", err)
		}
	}
	first := -1
	for k := range items {
		it := &items[k]
		if it.id != "" && it.tier == tierNone && durable[it.id] != nil {
			it.tier = tierDurable
		}
		switch {
		case it.tier == tierNone:
		case first < 0:
			first = k
		case it.tier != items[first].tier:
			return false, job.Invalid(it.field, "names %s, while %s names %s: memory jobs are kept apart from the others, "+
				"so a transaction cannot be atomic across both", tierJob(it.tier), items[first].field, tierJob(items[first].tier))
		}
	}
	return items[first].tier == tierMemory, nil
}

// tierJob describes the jobs of tier in an error.
func tierJob(tier int) string {
	if tier == tierMemory {
		return "a job of memory durability"
	}
	return "a job of full or process durability"
}

// lateMemoryItem returns err, the error of p run in the durable tier
// (memory false) or the memory one, except that an ack or fail item the
// durable tier does not know, whose job the memory tier holds, is
// job.ErrLeaseLost rather than job.ErrNotFound: a memory job that is no
// longer active is no longer routed to its tier, which would have said
// so.
func (s *Store) lateMemoryItem(ctx context.Context, p *store.JobTransactParams, memory bool, err error) error {
	var miss *job.ItemError
	if memory || !errors.As(err, &miss) || !errors.Is(miss.Err, job.ErrNotFound) || !s.used.Load() {
		return err
	}
	var id string
	var i int
	switch {
	case scanItem(miss.Field, "ack[%d].id", &i) && i < len(p.Complete):
		id = p.Complete[i].ID
	case scanItem(miss.Field, "fail[%d].id", &i) && i < len(p.Fail):
		id = p.Fail[i].ID
	default:
		return err
	}
	found, lerr := s.mem.JobGetMany(ctx, []string{id})
	if lerr != nil || found[id] == nil {
		return err
	}
	field := miss.Field[:len(miss.Field)-len(".id")]
	return fmt.Errorf("transact: %w", &job.ItemError{Field: job.MissField(field, job.ErrLeaseLost), Err: job.ErrLeaseLost})
}

// scanItem reads the index of field, written as format ("ack[%d].id").
func scanItem(field, format string, i *int) bool {
	n, err := fmt.Sscanf(field, format, i)
	return err == nil && n == 1 && fmt.Sprintf(format, *i) == field
}
