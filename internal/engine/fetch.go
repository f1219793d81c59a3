package engine

import (
	"context"
	"fmt"
	"slices"
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
	// Worker names the caller, for display: at most MaxWorkerBytes bytes
	// of free text. Each job the fetch leases keeps it (job.Job.Worker,
	// in its job.WorkerName form) until its next hand-out.
	Worker string
	// ConsumerGroup, when set, takes the jobs of that consumer group of
	// each queue (see CreateConsumerGroup) instead of the queues' own.
	ConsumerGroup string
	// Group, when set, takes only the jobs of that group (a tenant, or
	// one group of an ordered queue), never a job without a group:
	// at most MaxGroupBytes bytes of Unicode without NUL, as an
	// enqueue's. Every other rule of a fetch holds as without it (see
	// store.Claimer.JobClaim). Empty: the jobs of every group.
	Group string
	// Runs lets a free group of an ordered queue hand out several of its
	// jobs in order, a run, instead of one (store.JobClaimParams.Runs).
	Runs bool
	// MaxGroups, when positive, bounds how many groups of each queue give
	// the fetch jobs (0 to MaxFetch): 1 for a fetch of one group's run,
	// whichever group.
	MaxGroups int
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
	if req.MaxGroups < 0 || req.MaxGroups > MaxFetch {
		return job.Invalid("max_groups", "must be between 1 and %d", MaxFetch)
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
	req.Worker = job.WorkerName(req.Worker)
	if req.ConsumerGroup != "" && !job.ValidName(req.ConsumerGroup) {
		return job.Invalid("consumer_group", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	}
	return checkGroup(req.Group, "group")
}

// Fetch leases up to req.Max jobs, each of which keeps req.Worker as its
// job.Job.Worker, and records the worker as seen (see Workers). With
// req.Wait it parks until a job
// becomes available in one of the queues, the wait ends, ctx ends or the
// engine closes; it then returns what it has, possibly nothing. A fetch
// of one group (req.Group) is woken by the jobs of every group of its
// queues, and parks again when none of its own came. A fetch of a
// consumer group that does not exist, or stops existing while it is
// parked, is a *NotFoundError naming consumer_group.
func (e *Engine) Fetch(ctx context.Context, req FetchRequest) ([]*job.Job, error) {
	if err := e.validateFetch(&req); err != nil {
		return nil, err
	}
	if req.Worker != "" {
		e.workers.seen(req.Worker, e.Now())
	}
	queues := req.Queues
	if req.ConsumerGroup != "" {
		lanes, err := e.laneQueues(ctx, queues, req.ConsumerGroup)
		if err != nil {
			return nil, err
		}
		req.Queues = lanes
	}
	res, err := e.claim(ctx, &req)
	if err != nil || len(res.Jobs) > 0 || req.Wait <= 0 {
		return jobsOf(res), err
	}
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		// Register first, then look: a wake-up in between stays in the
		// waiter's buffered channel.
		w := e.waiters.add(req.Queues)
		if w == nil {
			return nil, nil // closing: answer empty, the client will retry elsewhere
		}
		res, err := e.claim(ctx, &req)
		if err != nil || len(res.Jobs) > 0 {
			e.waiters.remove(w)
			return jobsOf(res), err
		}
		e.armRetry(retry, res)
		select {
		case <-w.ch:
			e.waiters.remove(w)
			// The wake-up may be the deletion of the consumer group.
			if req.ConsumerGroup != "" {
				if _, err := e.laneQueues(ctx, queues, req.ConsumerGroup); err != nil {
					return nil, err
				}
			}
		case <-retry.C:
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

// cappedRecheck bounds the sleep of a fetch parked on a queue whose
// active cap held jobs back: a place freed on another node, or by a lease
// that ran out, is seen by then at the latest.
const cappedRecheck = time.Second

// armRetry sets retry for when the limits that held res's jobs back may
// let one start: the moment a rate allows one, and at most cappedRecheck
// after an active cap held jobs back. Without either, it does not fire.
func (e *Engine) armRetry(retry *time.Timer, res *store.ClaimResult) {
	d := time.Hour
	if !res.RetryAt.IsZero() {
		d = max(res.RetryAt.Sub(e.Now()), time.Millisecond)
	}
	if len(res.Capped) > 0 {
		d = min(d, cappedRecheck)
	}
	if !retry.Stop() {
		select {
		case <-retry.C:
		default:
		}
	}
	retry.Reset(d)
}

// jobsOf is the jobs of a claim, none on error.
func jobsOf(res *store.ClaimResult) []*job.Job {
	if res == nil {
		return nil
	}
	return res.Jobs
}

func (e *Engine) claim(ctx context.Context, req *FetchRequest) (*store.ClaimResult, error) {
	res, err := e.st.JobClaim(ctx, &store.JobClaimParams{
		Queues:        req.Queues,
		Max:           req.Max,
		LeaseDuration: req.LeaseDuration,
		Group:         req.Group,
		Runs:          req.Runs,
		MaxGroups:     req.MaxGroups,
		Worker:        req.Worker,
		Now:           e.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if len(res.Jobs) > 0 {
		e.emitStarted(res.Jobs, req.Worker)
	}
	for _, q := range res.Capped {
		e.capped.Store(q, true)
	}
	// The claim killed jobs past their wait into these queues.
	e.NotifyAvailable(res.Available)
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
	return res, nil
}

// freed wakes the fetches parked on the capped queues of outcomes whose
// jobs stopped being active.
func (e *Engine) freed(out []job.Outcome) {
	var queues []string
	for _, o := range out {
		if o.Err != nil || o.State == job.StateActive {
			continue
		}
		if _, ok := e.capped.Load(o.Queue); ok && !slices.Contains(queues, o.Queue) {
			queues = append(queues, o.Queue)
		}
	}
	e.NotifyAvailable(queues)
}
