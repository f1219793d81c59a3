package sqlkit

import (
	"fmt"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The items of a transaction that end leases are its acks, then its
// fails, numbered together from 0: TransactLease and TransactMiss speak
// of them so.

// TransactLease is the job and lease that item i of p holds.
func TransactLease(p *store.JobTransactParams, i int) (string, int64) {
	if i < len(p.Complete) {
		return store.CompleteKey(&p.Complete[i])
	}
	return store.FailKey(&p.Fail[i-len(p.Complete)])
}

// TransactMiss is the *job.ItemError that refuses item i of p, which
// holds no lease as miss says.
func TransactMiss(p *store.JobTransactParams, i int, miss error) error {
	item := fmt.Sprintf("ack[%d]", i)
	if i >= len(p.Complete) {
		item = fmt.Sprintf("fail[%d]", i-len(p.Complete))
	}
	return &job.ItemError{Field: job.MissField(item, miss), Err: miss}
}

// NewTransactResult is the result of p, its outcomes yet to fill and its
// inserts none yet.
func NewTransactResult(p *store.JobTransactParams) *store.TransactResult {
	return &store.TransactResult{
		Completed: make([]job.Outcome, len(p.Complete)),
		Failed:    make([]job.Outcome, len(p.Fail)),
		Inserted:  []store.InsertResult{},
	}
}

// RenameInserts gives err, met by the inserts of a transaction, the
// field names of its enqueue items.
func RenameInserts(err error) error { return job.RenameItems(err, "jobs", "enqueue") }
