package loadgen

import (
	"context"
	"sync"
	"time"
)

// ackWindow is how long a worker holds the acks of finished jobs while
// others of its jobs are still running, so that jobs finishing close
// together share one batch ack, as in a fast real worker.
const ackWindow = time.Millisecond

// Worker is one fetch/ack worker loop, shaped like the Go client's Worker:
// it fetches jobs for its free slots (of Concurrency), runs each job,
// frees the job's slot as soon as it finishes, and acks finished jobs in
// batches. A job runs for Work on a timer, so that thousands of jobs at
// once cost no goroutines. J is whatever the caller's Fetch hands out and
// its Ack takes back: a job's id and token, or a client's job.
//
// With Overlap the worker fetches more while finished jobs wait for their
// ack, holding at most twice Concurrency jobs (running or waiting for
// their ack), as a fast worker does. Without it, the worker fetches only
// when it holds no job, so that each fetch, its jobs' work and their ack
// follow one another; Fetch and Ack then never run at once and may share
// state, such as a random source.
type Worker[J any] struct {
	// Concurrency is how many jobs run at once, and the most one fetch
	// asks for (within MaxFetch). Defaults to 1.
	Concurrency int
	// Overlap lets fetches go on while finished jobs wait for their ack.
	Overlap bool
	// Work is how long each job runs; 0 finishes the jobs of a fetch as
	// they arrive, together.
	Work time.Duration
	// Budget, when set, bounds the jobs this worker and those sharing the
	// budget fetch in all; the worker ends once it is spent and its jobs
	// are acked.
	Budget *Budget
	// Fetch leases up to most jobs (fewer, or none, when the server hands
	// out fewer). After an error the worker fetches again at once unless
	// ctx ended, so a Fetch that fails should pause before it returns; a
	// failure that should end the run cancels ctx. Required.
	Fetch func(ctx context.Context, most int) ([]J, error)
	// Ack settles finished jobs, at most MaxBatch at a time. An error
	// after ctx ended ends the worker; any other error is the caller's to
	// count, and the jobs count as settled. Required.
	Ack func(ctx context.Context, jobs []J) error
	// Stop, when closed, ends the worker gracefully: it fetches no more
	// and returns once the jobs it holds are acked. Ending the context of
	// Run instead ends it at once, leaving held jobs to their leases.
	Stop <-chan struct{}
}

// Run runs the worker until ctx ends, Stop closes or the Budget is spent.
func (w Worker[J]) Run(ctx context.Context) {
	w.Concurrency = max(w.Concurrency, 1)
	r := &workerRun[J]{
		w: w,
		// Each send on done carries at least one held job, so 2 ×
		// Concurrency sends never block.
		done: make(chan []J, 2*w.Concurrency),
		wake: make(chan struct{}, 1),
	}
	fetching := make(chan struct{})
	go func() {
		defer close(fetching)
		r.fetchLoop(ctx)
	}()
	r.ackLoop(ctx, fetching)
	<-fetching
}

// workerRun is the state of one Worker's run.
type workerRun[J any] struct {
	w    Worker[J]
	done chan []J      // finished jobs waiting for their ack
	wake chan struct{} // signalled when slots or holds are freed

	mu      sync.Mutex
	running int // jobs fetched and not finished
	held    int // jobs fetched and not acked
}

// reserve waits until jobs can be fetched and reserves room for as many
// as may be: free slots, within the bound on held jobs, the server's fetch
// bound and the budget. It returns 0 when the worker is to fetch no more.
func (r *workerRun[J]) reserve(ctx context.Context) int {
	c := r.w.Concurrency
	for {
		if ctx.Err() != nil || stopped(r.w.Stop) {
			return 0
		}
		r.mu.Lock()
		n := min(c-r.running, 2*c-r.held, MaxFetch)
		if !r.w.Overlap && r.held > 0 {
			n = 0
		}
		if n > 0 && r.w.Budget != nil {
			if n = r.w.Budget.Take(n); n == 0 {
				r.mu.Unlock()
				return 0
			}
		}
		if n > 0 {
			r.running += n
			r.held += n
			r.mu.Unlock()
			return n
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0
		case <-r.w.Stop:
			return 0
		case <-r.wake:
		}
	}
}

// update changes the counts and wakes the fetch loop.
func (r *workerRun[J]) update(running, held int) {
	r.mu.Lock()
	r.running += running
	r.held += held
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// unfetched gives back n reserved jobs that a fetch did not hand out.
func (r *workerRun[J]) unfetched(n int) {
	r.update(-n, -n)
	if r.w.Budget != nil {
		r.w.Budget.Return(n)
	}
}

// busy reports whether any held job is still running.
func (r *workerRun[J]) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running > 0
}

// holding reports whether the worker holds any job.
func (r *workerRun[J]) holding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held > 0
}

func (r *workerRun[J]) fetchLoop(ctx context.Context) {
	for {
		n := r.reserve(ctx)
		if n == 0 {
			return
		}
		jobs, err := r.w.Fetch(ctx, n)
		if err != nil {
			r.unfetched(n)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		got := len(jobs)
		if got < n {
			r.unfetched(n - got)
		}
		if got == 0 {
			continue
		}
		if r.w.Work == 0 {
			// The jobs all finish now, together.
			r.done <- jobs
			r.update(-got, 0)
			continue
		}
		for i := range jobs {
			job := jobs[i : i+1 : i+1]
			time.AfterFunc(r.w.Work, func() {
				r.done <- job
				r.update(-1, 0)
			})
		}
	}
}

// ackLoop acks finished jobs: at once when none of the worker's jobs is
// still running, otherwise after at most ackWindow, so that jobs finishing
// close together share one call. Once fetching has ended (fetching is
// closed) it returns as soon as no job is held.
func (r *workerRun[J]) ackLoop(ctx context.Context, fetching <-chan struct{}) {
	c := r.w.Concurrency
	batch := make([]J, 0, 2*c)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time
	for {
		if len(batch) == 0 {
			if fetching == nil && !r.holding() {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-fetching:
				fetching = nil
				continue
			case jobs := <-r.done:
				batch = append(batch, jobs...)
				first = time.Now()
			}
		}
	ready:
		for {
			select {
			case jobs := <-r.done:
				batch = append(batch, jobs...)
			default:
				break ready
			}
		}
		if len(batch) < c && r.busy() {
			if wait := ackWindow - time.Since(first); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case jobs := <-r.done:
					timer.Stop()
					batch = append(batch, jobs...)
					continue
				case <-timer.C:
				}
			}
		}
		for len(batch) > 0 {
			n := min(len(batch), MaxBatch)
			if err := r.w.Ack(ctx, batch[:n]); err != nil && ctx.Err() != nil {
				return
			}
			r.update(0, -n)
			batch = append(batch[:0], batch[n:]...)
		}
	}
}
