package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlInsertQueue = `INSERT INTO queues (name) VALUES (?) ON CONFLICT (name) DO NOTHING`
	sqlInsertJob   = `INSERT INTO jobs (id, queue, kind, payload, priority, state, run_at, max_attempts,
	backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`
	sqlNewestUnique = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND unique_key = ? ORDER BY seq DESC LIMIT 1`
)

// JobInsertMany inserts p.Jobs atomically; see store.Inserter.
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	out := make([]store.InsertResult, len(p.Jobs))
	err := s.do(ctx, len(p.Jobs), func(w *writer) error {
		now := p.Now.UTC()
		for i := range p.Jobs {
			res, err := w.insert(&p.Jobs[i], now)
			if err != nil {
				return fmt.Errorf("jobs[%d]: %w", i, err)
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, wrap("insert jobs", err)
	}
	return out, nil
}

// insert inserts one job unless it duplicates an existing one by ID or
// unique key. Earlier jobs of the same batch are already in the
// transaction, so duplicates within a batch resolve to the first.
func (w *writer) insert(jp *store.JobInsertParams, now time.Time) (store.InsertResult, error) {
	if jp.State != job.StateAvailable && jp.State != job.StateScheduled {
		return store.InsertResult{}, fmt.Errorf("insert job %s in state %q: only scheduled or available", jp.ID, jp.State)
	}
	if jp.UniqueKey != "" {
		if dup, err := w.duplicate(jp, now); dup != nil || err != nil {
			return store.InsertResult{Job: dup, Duplicate: dup != nil}, err
		}
	}
	tags, err := encodeTags(jp.Tags)
	if err != nil {
		return store.InsertResult{}, err
	}
	runAt := jp.RunAt.UTC()
	res, err := w.st.insertJob.Exec(jp.ID, jp.Queue, jp.Kind, blobOrNull(jp.Payload), int64(jp.Priority), string(jp.State),
		runAt.UnixNano(), int64(jp.MaxAttempts), string(jp.Backoff.Kind), int64(jp.Backoff.Base), int64(jp.Backoff.Max),
		jp.Backoff.Jitter, int64(jp.LeaseDuration), stringOrNull(jp.UniqueKey), int64(jp.UniqueFor), tags, now.UnixNano())
	if err != nil {
		return store.InsertResult{}, fmt.Errorf("insert job %s: %w", jp.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.InsertResult{}, fmt.Errorf("insert job %s: %w", jp.ID, err)
	}
	if n == 0 {
		existing, _, err := w.load(jp.ID)
		if err != nil {
			return store.InsertResult{}, fmt.Errorf("read duplicate job %s: %w", jp.ID, err)
		}
		return store.InsertResult{Job: existing, Duplicate: true}, nil
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return store.InsertResult{}, fmt.Errorf("insert job %s: %w", jp.ID, err)
	}
	if _, err := w.ensureQueue(jp.Queue); err != nil {
		return store.InsertResult{}, err
	}
	j := &job.Job{
		ID: jp.ID, Queue: jp.Queue, Kind: jp.Kind, Payload: jp.Payload, Priority: jp.Priority, State: jp.State,
		RunAt: runAt, MaxAttempts: jp.MaxAttempts, Backoff: jp.Backoff, LeaseDuration: jp.LeaseDuration,
		UniqueKey: jp.UniqueKey, UniqueFor: jp.UniqueFor, Tags: jp.Tags, CreatedAt: now,
	}
	w.fx.move(jp.Queue, "", jp.State, 1)
	if jp.State == job.StateAvailable {
		w.madeAvailable(jp.Queue, entry{priority: jp.Priority, runAt: runAt.UnixNano(), seq: seq, body: j})
	}
	return store.InsertResult{Job: j}, nil
}

// duplicate returns the existing job that jp duplicates by ID or by unique
// key, or nil.
func (w *writer) duplicate(jp *store.JobInsertParams, now time.Time) (*job.Job, error) {
	existing, _, err := w.load(jp.ID)
	if err == nil {
		return existing, nil
	}
	if !errors.Is(err, job.ErrNotFound) {
		return nil, fmt.Errorf("look up job %s: %w", jp.ID, err)
	}
	newest, _, err := scanJob(w.st.newestUnique.QueryRow(jp.Queue, jp.UniqueKey))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up unique key: %w", err)
	}
	if l := w.leases.get(newest.ID); l != nil {
		l.view().overlay(newest)
	}
	if uniqueConflict(newest, jp.UniqueFor, now) {
		return newest, nil
	}
	return nil, nil
}

// uniqueConflict reports whether a new job with unique window uniqueFor
// duplicates newest, the newest job of its queue with its key: while
// newest is pending when the window is zero, else when newest was created
// within the window and is not cancelled.
func uniqueConflict(newest *job.Job, uniqueFor time.Duration, now time.Time) bool {
	if uniqueFor == 0 {
		return newest.State.Pending()
	}
	return newest.CreatedAt.After(now.Add(-uniqueFor)) && newest.State != job.StateCancelled
}

// load reads one job and its seq in the writer's transaction, as it
// stands with its lease, or job.ErrNotFound.
func (w *writer) load(id string) (*job.Job, int64, error) {
	j, seq, err := scanJob(w.st.jobByID.QueryRow(id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, job.ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	if l := w.leases.get(id); l != nil {
		l.view().overlay(j)
	}
	return j, seq, nil
}
