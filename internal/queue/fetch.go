package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// FetchRequest asks for jobs to work on.
type FetchRequest struct {
	// Queues to take jobs from: 1 to MaxFetchQueues names.
	Queues []string
	// Max jobs to return: 1 to MaxFetch. Zero means 1.
	Max int
	// Wait is how long to park when no job is available: 0 to MaxWait.
	Wait time.Duration
	// LeaseDuration overrides each job's own lease when non-zero.
	LeaseDuration time.Duration
	// Worker names the caller, for display.
	Worker string
}

func (e *Engine) validateFetch(req *FetchRequest) error {
	if len(req.Queues) == 0 {
		return job.Invalid("queues", "must name at least one queue")
	}
	if len(req.Queues) > MaxFetchQueues {
		return job.Invalid("queues", "at most %d queues allowed", MaxFetchQueues)
	}
	for i, q := range req.Queues {
		if !job.ValidName(q) {
			return job.Invalid(fmt.Sprintf("queues[%d]", i), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
		}
	}
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Max < 1 || req.Max > MaxFetch {
		return job.Invalid("max", "must be between 1 and %d", MaxFetch)
	}
	if req.Wait < 0 || req.Wait > MaxWait {
		return job.Invalid("wait_ms", "must be between 0 and %d", MaxWait.Milliseconds())
	}
	if req.LeaseDuration != 0 {
		if err := checkLease(req.LeaseDuration, "lease_ms"); err != nil {
			return err
		}
	}
	if len(req.Worker) > MaxWorkerBytes {
		return job.Invalid("worker", "must be at most %d bytes", MaxWorkerBytes)
	}
	return nil
}

// Fetch leases up to req.Max jobs. With req.Wait it parks until a job
// becomes available in one of the queues, the wait ends, ctx ends or the
// engine closes; it then returns what it has, possibly nothing.
func (e *Engine) Fetch(ctx context.Context, req FetchRequest) ([]*job.Job, error) {
	if err := e.validateFetch(&req); err != nil {
		return nil, err
	}
	jobs, err := e.claim(ctx, &req)
	if err != nil || len(jobs) > 0 || req.Wait <= 0 {
		return jobs, err
	}
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	for {
		// Register first, then look: a wake-up in between stays in the
		// waiter's buffered channel.
		w := e.waiters.add(req.Queues)
		if w == nil {
			return nil, nil // closing: answer empty, the client will retry elsewhere
		}
		jobs, err := e.claim(ctx, &req)
		if err != nil || len(jobs) > 0 {
			e.waiters.remove(w)
			return jobs, err
		}
		select {
		case <-w.ch:
			e.waiters.remove(w)
		case <-timer.C:
			e.waiters.remove(w)
			return nil, nil
		case <-ctx.Done():
			e.waiters.remove(w)
			return nil, nil
		case <-e.closing:
			e.waiters.remove(w)
			return nil, nil
		}
	}
}

func (e *Engine) claim(ctx context.Context, req *FetchRequest) ([]*job.Job, error) {
	res, err := e.st.JobClaim(ctx, &store.JobClaimParams{
		Queues:        req.Queues,
		Max:           req.Max,
		LeaseDuration: req.LeaseDuration,
		Now:           e.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	jobs := res.Jobs
	if len(jobs) > 0 {
		earliest := jobs[0].LeaseExpiresAt
		for _, j := range jobs[1:] {
			if j.LeaseExpiresAt.Before(earliest) {
				earliest = j.LeaseExpiresAt
			}
		}
		e.leased(earliest)
	}
	return jobs, nil
}
