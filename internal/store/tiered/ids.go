package tiered

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Ids are one space across the two tiers: an insert into one tier first
// looks for its ids in the other, and a job found there makes the insert
// a duplicate of it (or, in another queue, job.ErrIDTaken), as it would
// in the tier itself. Two inserts of one id into different tiers at once
// could each miss the other, so every insert registers its ids for as long
// as it runs, and an insert whose ids are being inserted into the other
// tier waits for that insert to end, then looks.
//
// Until the memory tier first takes a job no insert registers anything:
// the first memory insert waits for the durable inserts in flight (the
// gate), so that it sees their jobs.

// idGuard registers the ids of the inserts in flight, by tier.
type idGuard struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inflight map[string]*flight
}

// flight counts the inserts of one id in flight, all into one tier.
type flight struct {
	memory bool
	n      int
}

func newIDGuard() *idGuard {
	g := &idGuard{inflight: make(map[string]*flight)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// enter registers ids as being inserted into the memory tier (memory) or
// the durable one, once no insert into the other tier holds any of them.
// The caller must call leave with the same ids.
func (g *idGuard) enter(ids []string, memory bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.crossed(ids, memory) {
		g.cond.Wait()
	}
	for _, id := range ids {
		f := g.inflight[id]
		if f == nil {
			f = &flight{memory: memory}
			g.inflight[id] = f
		}
		f.n++
	}
}

// crossed reports whether an insert into the other tier holds one of ids.
func (g *idGuard) crossed(ids []string, memory bool) bool {
	for _, id := range ids {
		if f := g.inflight[id]; f != nil && f.memory != memory {
			return true
		}
	}
	return false
}

// leave ends the registration of ids made by enter.
func (g *idGuard) leave(ids []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if f := g.inflight[id]; f != nil {
			if f.n--; f.n == 0 {
				delete(g.inflight, id)
			}
		}
	}
	g.cond.Broadcast()
}

// insertInto inserts p into tier to, after looking for its ids in the
// other tier, other. Jobs whose ids the other tier holds are duplicates of
// the jobs there (or fail the insert, in another queue); the rest go into
// to, whose results fill in the others.
func (s *Store) insertInto(ctx context.Context, p *store.JobInsertManyParams, to, other Tier, memory bool) ([]store.InsertResult, error) {
	return s.guarded(ctx, p.Jobs, "jobs", other, memory, len(p.Create) > 0, func(rest []store.JobInsertParams) ([]store.InsertResult, error) {
		return to.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: rest, Create: p.Create, Now: p.Now})
	})
}

// guarded runs insert on the jobs whose ids the other tier does not hold,
// with the ids of every job registered while it runs (see idGuard); the
// others are duplicates of the jobs there, or fail the call in another
// queue. insert runs even with no job left when always is set. Results
// come back in the order of jobs. list is the name of the jobs in the
// call's fields ("jobs" for "jobs[3].id"), in the errors of insert as in
// those of guarded.
//
// An id the engine made just now (store.JobInsertParams.FreshID) is in
// no other job and no other insert: it is neither registered nor looked
// for, and a batch of such ids alone goes straight to insert.
func (s *Store) guarded(ctx context.Context, jobs []store.JobInsertParams, list string, other Tier, memory, always bool,
	insert func(rest []store.JobInsertParams) ([]store.InsertResult, error)) ([]store.InsertResult, error) {
	ids := make([]string, 0, len(jobs))
	for i := range jobs {
		if !jobs[i].FreshID {
			ids = append(ids, jobs[i].ID)
		}
	}
	if len(ids) == 0 {
		return insert(jobs)
	}
	s.ids.enter(ids, memory)
	defer s.ids.leave(ids)
	found, err := other.JobGetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: look up ids in the other tier: %w", err)
	}
	if len(found) == 0 {
		return insert(jobs)
	}
	out := make([]store.InsertResult, len(jobs))
	var rest []store.JobInsertParams
	var restIdx []int
	for i := range jobs {
		jp := &jobs[i]
		existing := found[jp.ID]
		if existing == nil {
			rest = append(rest, *jp)
			restIdx = append(restIdx, i)
			continue
		}
		if err := job.DuplicateByID(existing, jp.Queue, fmt.Sprintf("%s[%d].id", list, i)); err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		out[i] = store.InsertResult{Job: existing, Duplicate: true}
	}
	if len(rest) == 0 && !always {
		return out, nil
	}
	res, err := insert(rest)
	if err != nil {
		return nil, renumber(err, list, restIdx)
	}
	for k, i := range restIdx {
		out[i] = res[k]
	}
	return out, nil
}

// useMemory opens the memory tier to inserts: once the durable inserts
// that passed the gate before it have ended, every insert registers its
// ids.
func (s *Store) useMemory() {
	if s.used.Load() {
		return
	}
	s.gate.Lock()
	s.used.Store(true)
	s.gate.Unlock()
}

// renumber names the fields of an input or id error of a part of a batch
// as the whole batch does: "jobs[k]" of the part (with list "jobs") is
// "jobs[idx[k]]". Errors about fields of other lists keep theirs.
func renumber(err error, list string, idx []int) error {
	var in *job.InputError
	var taken *job.IDTakenError
	switch {
	case errors.As(err, &in):
		return fmt.Errorf("insert jobs: %w", &job.InputError{Field: renumberField(in.Field, list, idx), Message: in.Message})
	case errors.As(err, &taken):
		return fmt.Errorf("insert jobs: %w", &job.IDTakenError{Field: renumberField(taken.Field, list, idx)})
	}
	return err
}

// renumberField maps "list[k].rest" to "list[idx[k]].rest".
func renumberField(field, list string, idx []int) string {
	rest, ok := strings.CutPrefix(field, list+"[")
	if !ok {
		return field
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return field
	}
	k, err := strconv.Atoi(rest[:end])
	if err != nil || k < 0 || k >= len(idx) {
		return field
	}
	return fmt.Sprintf("%s[%d]%s", list, idx[k], rest[end+1:])
}
