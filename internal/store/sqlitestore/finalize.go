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

// The outcome calls read the job by id, check its token in Go, then update
// it by seq. (One UPDATE ... RETURNING costs more than the two.)
const (
	sqlLeaseLoad = `SELECT seq, queue, state, lease_token, cancel_requested, lease_ns, attempt, max_attempts,
	backoff_kind, backoff_base, backoff_max, backoff_jitter
FROM jobs WHERE id = ?`
	sqlComplete   = `UPDATE jobs SET state = ?, result = ?, finished_at = ?, lease_expires_at = NULL WHERE seq = ?`
	sqlFailUpdate = `UPDATE jobs SET state = ?, run_at = COALESCE(?, run_at), finished_at = ?, lease_expires_at = NULL,
	errors = json_insert(COALESCE(errors, '[]'), '$[#]', json(?))
WHERE seq = ?`
	sqlExtend   = `UPDATE jobs SET lease_expires_at = ? WHERE seq = ?`
	sqlProgress = `UPDATE jobs SET progress = ? WHERE seq = ?`
	// sqlRelease hands a job back: ?1 is the new state, ?2 finished_at.
	sqlRelease = `UPDATE jobs SET state = ?1, attempt = MAX(attempt - 1, 0), finished_at = ?2, lease_expires_at = NULL
WHERE seq = ?3 RETURNING priority, run_at`
)

// leased is what the outcome calls need to know of a job.
type leased struct {
	seq                  int64
	queue                string
	cancelRequested      bool
	lease                time.Duration
	attempt, maxAttempts int
	backoff              job.Backoff
}

// leaseOf reads job id and checks that token is its current lease. miss is
// job.ErrNotFound or job.ErrLeaseLost when it is not; err is a database
// failure.
func (w *writer) leaseOf(id string, token int64) (l leased, miss, err error) {
	var state, kind string
	var current, lease, attempt, maxAttempts, base, maxDelay int64
	err = w.st.leaseLoad.QueryRow(id).Scan(&l.seq, &l.queue, &state, &current, &l.cancelRequested, &lease,
		&attempt, &maxAttempts, &kind, &base, &maxDelay, &l.backoff.Jitter)
	if errors.Is(err, sql.ErrNoRows) {
		return l, job.ErrNotFound, nil
	}
	if err != nil {
		return l, nil, fmt.Errorf("read job %s: %w", id, err)
	}
	if state != string(job.StateActive) || current != token {
		return l, job.ErrLeaseLost, nil
	}
	l.lease = time.Duration(lease)
	l.attempt, l.maxAttempts = int(attempt), int(maxAttempts)
	l.backoff.Kind, l.backoff.Base, l.backoff.Max = job.BackoffKind(kind), time.Duration(base), time.Duration(maxDelay)
	return l, nil, nil
}

// JobComplete acknowledges jobs item by item; see store.Claimer.
func (s *Store) JobComplete(ctx context.Context, p *store.JobCompleteParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	err := s.do(ctx, len(p.Items), func(w *writer) error {
		now := p.Now.UTC().UnixNano()
		for i := range p.Items {
			if err := w.complete(&p.Items[i], now, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("complete jobs", err)
	}
	return out, nil
}

func (w *writer) complete(it *store.JobCompleteItem, now int64, o *store.Outcome) error {
	l, miss, err := w.leaseOf(it.ID, it.Token)
	if miss != nil || err != nil {
		o.Err = miss
		return err
	}
	o.Queue, o.State = l.queue, job.StateCompleted
	if l.cancelRequested {
		o.State = job.StateCancelled
	}
	if _, err := w.st.complete.Exec(string(o.State), blobOrNull(it.Result), now, l.seq); err != nil {
		return fmt.Errorf("complete job %s: %w", it.ID, err)
	}
	w.fx.move(l.queue, job.StateActive, o.State, 1)
	return nil
}

// JobFail records failed attempts item by item; see store.Claimer.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	err := s.do(ctx, len(p.Items), func(w *writer) error {
		now := p.Now.UTC()
		for i := range p.Items {
			if err := w.failAttempt(&p.Items[i], now, p.Rand, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("fail jobs", err)
	}
	return out, nil
}

func (w *writer) failAttempt(it *store.JobFailItem, now time.Time, rnd func() float64, o *store.Outcome) error {
	l, miss, err := w.leaseOf(it.ID, it.Token)
	if miss != nil || err != nil {
		o.Err = miss
		return err
	}
	o.Queue = l.queue
	var runAt, finished any
	switch {
	case l.cancelRequested:
		o.State, finished = job.StateCancelled, now.UnixNano()
	case it.NoRetry || l.attempt >= l.maxAttempts:
		o.State, finished = job.StateDead, now.UnixNano()
	default:
		delay := it.RetryAfter
		if delay <= 0 {
			delay = l.backoff.Delay(l.attempt, rnd)
		}
		o.State, o.RunAt = job.StateRetrying, now.Add(delay)
		runAt = o.RunAt.UnixNano()
	}
	attemptErr, err := encodeAttemptError(l.attempt, it.Message, now)
	if err != nil {
		return err
	}
	if _, err := w.st.failUpdate.Exec(string(o.State), runAt, finished, attemptErr, l.seq); err != nil {
		return fmt.Errorf("fail job %s: %w", it.ID, err)
	}
	w.fx.move(l.queue, job.StateActive, o.State, 1)
	return nil
}

// JobExtend moves leases forward item by item; see store.Claimer.
func (s *Store) JobExtend(ctx context.Context, p *store.JobExtendParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	err := s.do(ctx, len(p.Items), func(w *writer) error {
		now := p.Now.UTC()
		for i := range p.Items {
			it := &p.Items[i]
			l, miss, err := w.leaseOf(it.ID, it.Token)
			if miss != nil || err != nil {
				out[i].Err = miss
				if err != nil {
					return err
				}
				continue
			}
			lease := it.Lease
			if lease <= 0 {
				lease = l.lease
			}
			expires := now.Add(lease)
			if _, err := w.st.extend.Exec(expires.UnixNano(), l.seq); err != nil {
				return fmt.Errorf("extend lease of job %s: %w", it.ID, err)
			}
			out[i] = store.Outcome{Queue: l.queue, State: job.StateActive, LeaseExpiresAt: expires, CancelRequested: l.cancelRequested}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("extend leases", err)
	}
	return out, nil
}

// JobProgress stores a progress report of an active job; see
// store.Claimer.
func (s *Store) JobProgress(ctx context.Context, p *store.JobProgressParams) error {
	err := s.do(ctx, 1, func(w *writer) error {
		l, miss, err := w.leaseOf(p.ID, p.Token)
		if err != nil {
			return err
		}
		if miss != nil {
			return fmt.Errorf("job %s: %w", p.ID, miss)
		}
		if _, err := w.st.progress.Exec(blobOrNull(p.Progress), l.seq); err != nil {
			return fmt.Errorf("store progress of job %s: %w", p.ID, err)
		}
		return nil
	})
	if err != nil {
		return wrap("report progress", err)
	}
	return nil
}

// JobRelease hands active jobs back unrun, item by item; see
// store.Claimer.
func (s *Store) JobRelease(ctx context.Context, p *store.JobReleaseParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	err := s.do(ctx, len(p.Items), func(w *writer) error {
		now := p.Now.UTC().UnixNano()
		for i := range p.Items {
			if err := w.release(&p.Items[i], now, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("release jobs", err)
	}
	return out, nil
}

func (w *writer) release(it *store.JobReleaseItem, now int64, o *store.Outcome) error {
	l, miss, err := w.leaseOf(it.ID, it.Token)
	if miss != nil || err != nil {
		o.Err = miss
		return err
	}
	o.Queue, o.State = l.queue, job.StateAvailable
	var finished any
	if l.cancelRequested {
		o.State, finished = job.StateCancelled, now
	}
	var priority, runAt int64
	if err := w.st.releaseJob.QueryRow(string(o.State), finished, l.seq).Scan(&priority, &runAt); err != nil {
		return fmt.Errorf("release job %s: %w", it.ID, err)
	}
	w.fx.move(l.queue, job.StateActive, o.State, 1)
	if o.State == job.StateAvailable {
		w.madeAvailable(l.queue, entry{priority: int(priority), runAt: runAt, seq: l.seq})
	}
	return nil
}
