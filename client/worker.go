package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Worker defaults and bounds.
const (
	// DefaultConcurrency is how many handlers a Worker runs at once unless
	// WorkerConfig.Concurrency says otherwise.
	DefaultConcurrency = 10
	// DefaultWait is a Worker's long poll unless WorkerConfig.Wait says
	// otherwise.
	DefaultWait = 30 * time.Second
	// DefaultShutdownTimeout is how long Run lets handlers finish after its
	// context ends unless WorkerConfig.ShutdownTimeout says otherwise.
	DefaultShutdownTimeout = 30 * time.Second

	// maxFetch is the server's bound on one fetch.
	maxFetch = 1000
	// callTimeout bounds each ack, fail, extend and release call a worker
	// makes; a server that does not answer within it is retried or given
	// up on, never waited for forever.
	callTimeout = 10 * time.Second
	// minBackoff and maxBackoff bound the waits between retries of failed
	// fetches, heartbeats and acks.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// WorkerConfig configures a Worker. Zero values take the defaults.
type WorkerConfig struct {
	// Queues are the queues to take jobs from, in the server's priority
	// order across them. Defaults to ["default"].
	Queues []string
	// Concurrency is the most handlers running at once. Defaults to
	// DefaultConcurrency (10).
	Concurrency int
	// FetchMax is the most jobs one fetch asks for; a fetch never asks for
	// more than the free slots, and waits up to SettleDelay for all of
	// FetchMax to be free while handlers run and keep finishing. Defaults
	// to Concurrency (at most 1000).
	FetchMax int
	// Wait is the long poll of each fetch: how long the server holds a
	// fetch open when no job is available (at most 60 s). Defaults to
	// DefaultWait (30 s).
	Wait time.Duration
	// Lease, when set, overrides each job's own lease duration, both at
	// fetch and at every heartbeat (100 ms to 24 h).
	Lease time.Duration
	// HeartbeatInterval is the time between heartbeats, which extend the
	// leases of all the worker's running jobs in one call. Defaults to a
	// third of the shortest lease among them.
	HeartbeatInterval time.Duration
	// ShutdownTimeout is how long Run, once its context ends, lets running
	// handlers finish before it cancels them and releases their jobs (as
	// Stop does when its context ends). A negative value releases them at
	// once. Defaults to DefaultShutdownTimeout (30 s).
	ShutdownTimeout time.Duration
	// Name identifies the worker to the server (shown with fetches) and in
	// logs and errors. Defaults to "host/pid-N".
	Name string
	// ConsumerGroup, when set, runs the jobs of that consumer group of
	// each of Queues (see CreateConsumerGroup), which must exist.
	ConsumerGroup string
	// Group, when set, runs only the jobs of that group of Queues (see
	// FetchParams.Group): a worker of one tenant, or of one group of an
	// ordered queue. Defaults to every group.
	Group string
	// Runs, for workers of ordered queues, fetches with FetchParams.Runs
	// and runs each run one job after another, in the order received, in
	// one goroutine: the jobs of one queue and one group in a fetch's
	// answer are one run. The run stops at the first job that is not
	// acked (its handler fails, its lease is lost, the worker stops): its
	// later jobs are dropped unrun, neither acked nor failed, and handed
	// back in one release call. On an ordered queue
	// the server has already sent them back and refuses their release
	// with lease_lost, which the worker ignores; on a queue that is not
	// ordered, where the jobs of a group in one fetch also run one after
	// another, the release makes them available again at once. Each job
	// of a run holds a slot from its fetch until it ends or is dropped,
	// so Concurrency still bounds the jobs held and the handlers running.
	// Defaults to false: every job runs in its own goroutine.
	Runs bool
	// MaxGroups, with Runs, fetches with FetchParams.MaxGroups: 1 takes
	// one group's run a fetch, whichever group, so that each fetch's jobs
	// are one run. Without Runs it only bounds the groups of each fetch.
	// Defaults to 0: any number of groups.
	MaxGroups int
	// Logger receives the worker's logs: failed calls at warn, jobs it had
	// to drop at warn, each job's outcome at debug. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Worker fetches jobs from a Spool server and runs them with the handlers
// registered for their kinds, up to Concurrency at once.
//
// It fetches in batches of up to its free slots with long polling; runs
// each job in its own goroutine (each run of an ordered queue in one, with
// WorkerConfig.Runs); heartbeats all held jobs' leases in one
// call per interval; acks each job with its handler's result or fails it
// with its error; and stops a handler's context when the server reports
// the job cancelled or its lease lost (see HandlerFunc). Failed calls are
// retried with bounded, jittered backoff: a worker never spins against a
// server that is down, and never gives up on it either.
//
// Handlers that finish together share their calls, so that a busy worker
// costs the server a few requests and commits per hundred jobs rather than
// one per job. An ack or fail waits at most SettleDelay (2 ms) for others
// to join it in one batch call (POST /v1/jobs/ack, POST /v1/jobs/fail),
// and goes at once when no other handler runs, when Concurrency outcomes
// wait, or when the worker stops; each job still gets its own answer, so a
// stale token fails only its own job. A handler's slot frees when it
// returns, and a fetch asks for every free slot, waiting, while handlers
// still running keep finishing, up to SettleDelay for all of FetchMax to be
// free. A job stays the worker's, its lease extended, until its outcome is
// answered; a worker that dies before then leaves the job to be handed out
// again when its lease ends, as for a worker that dies while the handler
// runs. At most four times Concurrency jobs are held at once, however slow
// the acks.
//
// A job whose kind has no handler on this worker is failed (not released)
// with an error that names the kind: releasing would hand it straight back
// to this same worker in a loop, while a failure retries after its backoff,
// when a worker that has the handler can take it, and shows in the job's
// errors. Give workers with different handlers different queues.
//
// A Worker runs once: Handle, then Run, then Stop (or cancel Run's
// context).
type Worker struct {
	c        *Client
	cfg      WorkerConfig
	log      *slog.Logger
	handlers map[string]HandlerFunc

	// stopCh closes when a stop begins, hardCh when handlers are cancelled,
	// done when Run has returned. hbQuit ends the heartbeat loop.
	stopCh, hardCh, done, hbQuit chan struct{}
	stopOnce, hardOnce           sync.Once
	slotFreed, hbWake            chan struct{}
	jobsWG                       sync.WaitGroup

	// settler sends the outcomes of jobs that finish together in one call.
	settler *settler

	mu          sync.Mutex
	started     bool
	stopping    bool
	running     int                    // handlers running: slots in use
	jobs        map[*inflight]struct{} // jobs held: running, or finished and not yet answered
	abandoned   []*inflight            // jobs to release at the end of Run
	released    int                    // jobs released unfinished
	dropped     int                    // jobs of runs dropped unrun, counted once their release was answered (see dropRun)
	hbFailures  int                    // heartbeat calls failed in a row
	baseCtx     context.Context        // Run's context without its cancellation
	hardCtx     context.Context        // parent of every handler's context
	hardCancel  context.CancelCauseFunc
	fetchCancel context.CancelFunc
}

// NewWorker returns a worker that takes jobs from c's server as cfg says.
// Register handlers with Handle, then call Run.
func NewWorker(c *Client, cfg WorkerConfig) *Worker {
	if c == nil {
		panic("client: NewWorker needs a Client")
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.FetchMax <= 0 || cfg.FetchMax > cfg.Concurrency {
		cfg.FetchMax = cfg.Concurrency
	}
	cfg.FetchMax = min(cfg.FetchMax, maxFetch)
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "unknown"
		}
		cfg.Name = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{
		settler:   &settler{c: c, delay: SettleDelay, maxItems: min(cfg.Concurrency, maxSettleBatch)},
		c:         c,
		cfg:       cfg,
		log:       cfg.Logger.With("worker", cfg.Name),
		handlers:  map[string]HandlerFunc{},
		stopCh:    make(chan struct{}),
		hardCh:    make(chan struct{}),
		done:      make(chan struct{}),
		hbQuit:    make(chan struct{}),
		slotFreed: make(chan struct{}, 1),
		hbWake:    make(chan struct{}, 1),
		jobs:      map[*inflight]struct{}{},
	}
}

// Handle registers fn to run jobs of kind. It must be called before Run; it
// panics when called after, with an empty kind or a nil fn, or twice for
// one kind, as these are programming errors.
func (w *Worker) Handle(kind string, fn HandlerFunc) {
	if kind == "" || fn == nil {
		panic("client: Worker.Handle needs a kind and a handler")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("client: Worker.Handle called after Run")
	}
	if _, dup := w.handlers[kind]; dup {
		panic(fmt.Sprintf("client: Worker.Handle: kind %q registered twice", kind))
	}
	w.handlers[kind] = fn
}

// Run fetches and runs jobs until ctx ends or Stop is called, then shuts
// down: it stops fetching at once, lets running handlers finish and acks
// them, and, after ShutdownTimeout (when ctx ended) or when Stop's context
// ends, cancels the handlers still running and releases their jobs so that
// other workers take them at once without losing an attempt.
//
// Run returns nil after such a stop, once every job it fetched is acked,
// failed, released or known lost, and every goroutine it started has
// ended, except handlers that ignore their cancelled context. It returns an
// error at once when the worker has no handlers, was run before, or was
// stopped before Run; and, after draining, when the server refuses the
// fetch itself as invalid (a bad queue name, say), since retrying cannot
// help. Other fetch errors are logged and retried with backoff.
//
// Handlers' contexts carry ctx's values but not its cancellation, and
// their job's traceparent in place of any ctx carries (see HandlerFunc).
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("run worker: already run")
	}
	w.started = true
	if w.stopping {
		w.mu.Unlock()
		close(w.done)
		return fmt.Errorf("run worker: %w", ErrWorkerStopped)
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		close(w.done)
		return errors.New("run worker: no handlers registered")
	}
	w.baseCtx = context.WithoutCancel(ctx)
	w.settler.base = w.baseCtx
	w.hardCtx, w.hardCancel = context.WithCancelCause(w.baseCtx)
	fetchCtx, fetchCancel := context.WithCancel(w.baseCtx)
	w.fetchCancel = fetchCancel
	w.mu.Unlock()

	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeatLoop()
	}()
	fetchDone := make(chan error, 1)
	go func() { fetchDone <- w.fetchLoop(fetchCtx) }()

	var (
		runErr  error
		fetched bool
		grace   <-chan time.Time
	)
	select {
	case <-ctx.Done():
		w.beginStop()
		if w.cfg.ShutdownTimeout < 0 {
			w.hardStop()
		} else {
			t := time.NewTimer(w.cfg.ShutdownTimeout)
			defer t.Stop()
			grace = t.C
		}
	case <-w.stopCh:
	case runErr = <-fetchDone:
		fetched = true
		w.beginStop()
	}
	if !fetched {
		runErr = <-fetchDone
	}

	drained := make(chan struct{})
	go func() {
		w.jobsWG.Wait()
		close(drained)
	}()
	for waiting := true; waiting; {
		select {
		case <-drained:
			waiting = false
		case <-grace:
			grace = nil
			w.hardStop()
		case <-w.hardCh:
			<-drained
			waiting = false
		}
	}
	w.settler.flights.Wait()
	w.releaseAbandoned()
	close(w.hbQuit)
	<-hbDone
	fetchCancel()
	w.hardCancel(ErrWorkerStopped)
	close(w.done)
	return runErr
}

// Stop stops the worker gracefully and waits for Run to return: fetching
// stops at once, and running handlers may finish and be acked until ctx
// ends. Then the handlers still running have their contexts cancelled
// (cause ErrWorkerStopped) and their jobs are released, so that other
// workers take them at once without losing an attempt; Stop then returns an
// error, wrapping ctx's, that says how many jobs it released.
//
// Stop is idempotent and safe to call concurrently, before Run (Run then
// returns at once) and after Run returned.
func (w *Worker) Stop(ctx context.Context) error {
	w.beginStop()
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	w.hardStop()
	<-w.done
	w.mu.Lock()
	n := w.released
	w.mu.Unlock()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("stop worker: released %d unfinished jobs: %w", n, ctx.Err())
}

// beginStop stops fetching: no job is started after it.
func (w *Worker) beginStop() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.stopping = true
		cancel := w.fetchCancel
		w.mu.Unlock()
		close(w.stopCh)
		if cancel != nil {
			cancel()
		}
		w.settler.flush() // outcomes waiting to be shared go now
	})
}

// hardStop gives up on the handlers still running: their jobs are set
// aside for release and their contexts cancelled. Jobs whose handler has
// returned are still acked or failed.
func (w *Worker) hardStop() {
	w.hardOnce.Do(func() {
		w.mu.Lock()
		for e := range w.jobs {
			if e.handlerDone || e.abandoned || e.queued {
				continue // a queued job's run releases or drops it
			}
			e.abandoned = true
			e.cancel(ErrWorkerStopped) // before the runner, which cancels on exit, can go
			close(e.abandon)
			if !e.lost {
				w.abandoned = append(w.abandoned, e)
			}
		}
		w.mu.Unlock()
		close(w.hardCh)
		w.hardCancel(ErrWorkerStopped)
	})
}

// fetchLoop fetches jobs while slots are free until the stop begins. It
// returns an error only for fetches that retrying cannot fix.
func (w *Worker) fetchLoop(ctx context.Context) error {
	failures := 0
	for {
		free := w.waitFree()
		if free == 0 {
			return nil
		}
		free = w.gatherFree(free)
		began := time.Now()
		jobs, err := w.c.Fetch(ctx, FetchParams{
			Queues: w.cfg.Queues,
			Max:    min(free, w.cfg.FetchMax),
			Wait:   w.cfg.Wait,
			Lease:  w.cfg.Lease,
			Worker: w.cfg.Name,
			// The jobs of a consumer group, when the worker serves one.
			ConsumerGroup: w.cfg.ConsumerGroup,
			// The jobs of one group, when it serves one.
			Group:     w.cfg.Group,
			Runs:      w.cfg.Runs,
			MaxGroups: w.cfg.MaxGroups,
		})
		if unstarted := w.start(jobs); len(unstarted) > 0 {
			var expected []error
			if w.cfg.Runs {
				// On an ordered queue the release of a run's first job
				// sends the rest of the run back before their own items.
				expected = []error{ErrLeaseLost}
			}
			w.release(unstarted, "fetched during shutdown", expected...)
		}
		if w.isStopping() {
			return nil
		}
		switch {
		case err != nil && permanent(err):
			w.log.Error("worker stops: the server refuses its fetch", "err", err)
			return fmt.Errorf("run worker: %w", err)
		case err != nil:
			failures++
			d := backoff(failures)
			w.log.Warn("fetch failed; retrying", "err", err, "retry_in", d)
			if !w.sleep(d) {
				return nil
			}
		case len(jobs) == 0 && time.Since(began) < w.cfg.Wait/2:
			// An empty answer long before the wait ended: the server is
			// shutting down or cut the poll short. Do not spin on it.
			failures++
			if !w.sleep(backoff(failures)) {
				return nil
			}
		default:
			failures = 0
		}
	}
}

// gatherFree returns the free slots, having waited, while fewer than
// FetchMax are free, for handlers still running to free more: as long as
// one frees within gatherQuiet of the last, up to SettleDelay in all.
// Handlers that finish together then share one fetch, as their outcomes
// share one call, while a slot freed alone waits at most gatherQuiet. It
// does not wait when no handler runs.
func (w *Worker) gatherFree(free int) int {
	if free >= w.cfg.FetchMax || w.idle() {
		return free
	}
	deadline := time.NewTimer(SettleDelay)
	defer deadline.Stop()
	quiet := time.NewTimer(gatherQuiet)
	defer quiet.Stop()
	for free > 0 && free < w.cfg.FetchMax && !w.idle() {
		select {
		case <-w.slotFreed:
			quiet.Reset(gatherQuiet)
		case <-quiet.C:
			return w.waitFree()
		case <-deadline.C:
			return w.waitFree()
		case <-w.stopCh:
			return 0
		}
		free = w.waitFree()
	}
	return free
}

// gatherQuiet is how long gatherFree waits for the next slot to free.
const gatherQuiet = 200 * time.Microsecond

// heldPerSlot bounds the jobs a Worker holds, running or waiting for their
// outcome's answer, to this many times Concurrency: a batch of acks that
// waits for the disk does not keep the next fetch from filling the slots.
const heldPerSlot = 4

// permanent reports whether a fetch error means the request itself is
// wrong, so that retrying it cannot help.
func permanent(err error) bool {
	return errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidJSON) ||
		errors.Is(err, ErrBatchTooLarge) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrMethodNotAllowed) ||
		errors.Is(err, ErrUpgradeRequired)
}

// waitFree blocks until a slot is free and returns how many are, or 0 once
// the stop began. The jobs whose handlers returned and whose outcomes are
// not yet answered count too, beyond Concurrency of them, so that a worker
// never holds more than heldPerSlot times Concurrency jobs however slow
// its acks.
func (w *Worker) waitFree() int {
	for {
		w.mu.Lock()
		free := min(w.cfg.Concurrency-w.running, heldPerSlot*w.cfg.Concurrency-len(w.jobs))
		stopping := w.stopping
		w.mu.Unlock()
		if stopping {
			return 0
		}
		if free > 0 {
			return free
		}
		select {
		case <-w.slotFreed:
		case <-w.stopCh:
			return 0
		}
	}
}

func (w *Worker) freeSlot() {
	w.mu.Lock()
	w.running--
	w.mu.Unlock()
	w.signalFree()
}

// signalFree wakes waitFree.
func (w *Worker) signalFree() {
	select {
	case w.slotFreed <- struct{}{}:
	default:
	}
}

// idle reports whether no handler runs, or the stop began: no slot is
// about to free.
func (w *Worker) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running == 0 || w.stopping
}

func (w *Worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

// sleep waits d, or less when the stop begins; it reports whether the
// whole wait passed.
func (w *Worker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stopCh:
		return false
	}
}

// release hands jobs the worker will not run back to the server in one
// call. An item refused with one of expected (such as ErrLeaseLost for a
// job of a run the server already sent back) is logged at debug only;
// other refusals, and a failed call, are logged as warnings: those jobs
// run again when their leases expire.
func (w *Worker) release(items []ReleaseItem, why string, expected ...error) {
	ctx, cancel := context.WithTimeout(w.baseCtx, callTimeout)
	defer cancel()
	results, err := w.c.ReleaseBatch(ctx, items)
	if err != nil {
		w.log.Warn("release jobs failed; they run again when their leases expire", "why", why, "jobs", len(items), "err", err)
		return
	}
	for _, r := range results {
		switch {
		case r.Err == nil:
			w.log.Debug("job released", "why", why, "job_id", r.ID, "state", r.State)
		case isAny(r.Err, expected):
			w.log.Debug("job not released: already back with the server", "why", why, "job_id", r.ID, "err", r.Err)
		default:
			w.log.Warn("release job failed", "why", why, "job_id", r.ID, "err", r.Err)
		}
	}
}

// isAny reports whether err matches any of targets.
func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// releaseAbandoned releases the jobs whose handlers hardStop gave up on.
func (w *Worker) releaseAbandoned() {
	w.mu.Lock()
	items := make([]ReleaseItem, 0, len(w.abandoned))
	for _, e := range w.abandoned {
		items = append(items, ReleaseItem{ID: e.job.ID, Token: e.token})
	}
	w.released = len(items)
	w.mu.Unlock()
	if len(items) > 0 {
		w.release(items, "unfinished at shutdown")
	}
}

// backoff is the wait before retry number n (1-based): exponential from
// minBackoff, capped at maxBackoff, with the upper half jittered so that
// many workers do not retry in step.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n < 16 {
		d = min(minBackoff<<(n-1), maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}
