package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/loadgen"
	"github.com/spoolq/spool/internal/stream"
)

// prefillClients is the number of clients that prefill process mode.
const prefillClients = 4

// errTooManyErrors ends a run that reached MaxErrors.
var errTooManyErrors = fmt.Errorf("stopped after %d errors", MaxErrors)

// runner runs one benchmark against one target.
type runner struct {
	o      Options
	t      *target
	base   string
	auth   string // the Authorization header, or ""
	client *http.Client
	stream *stream.Client // the stream of TransportStream, else nil
	// streamDeadline bounds the requests sent on stream.
	streamDeadline sharedDeadline
	res            *Result
	queues         []string
	bodies         *bodies

	hEnqueue, hFetch, hAck, hStart *Histogram

	enqueued  atomic.Int64 // jobs accepted by the server
	processed atomic.Int64 // jobs acked successfully
	settled   atomic.Int64 // jobs whose ack was answered, well or not
	requests  atomic.Int64 // successful requests in the window
	inWindow  atomic.Bool
	rssMax    atomic.Int64 // largest server RSS sampled in the window

	producersDone atomic.Bool
	done          chan struct{} // closed when every enqueued job is settled
	doneOnce      sync.Once
	doneAt        atomic.Int64 // UnixNano of the last ack, once done
	producedAt    atomic.Int64 // UnixNano when the producers finished
	windowStart   time.Time
	stop          context.CancelCauseFunc
	phase         atomic.Pointer[string]

	errMu   sync.Mutex
	errs    int64
	samples []string
}

func newRunner(o Options, t *target) *runner {
	r := &runner{
		o: o, t: t, base: t.url,
		client:   newHTTPClient(connections(o)),
		hEnqueue: NewHistogram(), hFetch: NewHistogram(), hAck: NewHistogram(), hStart: NewHistogram(),
		done: make(chan struct{}),
	}
	r.res = &Result{Name: o.Label, Mode: o.Mode, Server: t.describe(), CPUs: runtime.NumCPU(), Settings: settingsOf(o)}
	if t.child != nil {
		r.res.Sync = o.Sync
	}
	id := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := 0; i < o.Queues; i++ {
		q := id
		if o.Queues > 1 {
			q += "-" + strconv.Itoa(i)
		}
		r.queues = append(r.queues, q)
	}
	r.bodies = newBodies(o, r.queues)
	if o.Token != "" {
		r.auth = "Bearer " + o.Token
	}
	if o.Transport == TransportStream {
		r.stream = newStreamClient(r.base, r.auth)
		r.res.Transport = o.Transport
	}
	r.setPhase("run")
	return r
}

// connections is the most requests a run has in flight at once: one per
// producer, and a fetch and an ack per worker.
func connections(o Options) int {
	switch o.Mode {
	case ModeEnqueue, ModeEnqueueBatch:
		return o.Concurrency
	case ModeProcess:
		return max(prefillClients, 2*o.Workers)
	}
	return o.Producers + 2*o.Workers
}

func settingsOf(o Options) Settings {
	s := Settings{Jobs: o.Jobs, Batch: o.Batch, Concurrency: o.Concurrency, Workers: o.Workers,
		Producers: o.Producers, Queues: o.Queues, Groups: o.Groups, Rate: o.Rate, PayloadBytes: o.PayloadBytes}
	if !o.Limits.IsZero() {
		s.Limits = describeLimits(o.Limits)
		if o.Runs {
			s.Limits += ", runs"
		}
		if o.MaxGroups > 0 {
			s.Limits += fmt.Sprintf(", max-groups %d", o.MaxGroups)
		}
	}
	if o.Duration > 0 {
		s.Duration = o.Duration.String()
	}
	if o.Work > 0 {
		s.Work = o.Work.String()
	}
	return s
}

func (r *runner) setPhase(p string) { r.phase.Store(&p) }

// countError counts an error of the run, keeps its message if it is among
// the first few distinct ones, and ends the run at MaxErrors.
func (r *runner) countError(msg string) {
	r.errMu.Lock()
	r.errs++
	r.samples = addSample(r.samples, msg)
	n := r.errs
	r.errMu.Unlock()
	if n >= MaxErrors {
		r.stop(errTooManyErrors)
	}
}

// errorCount is the number of errors so far.
func (r *runner) errorCount() int64 {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.errs
}

// checkDone ends the workers' part of the run once the producers are done
// and every job they enqueued has been acked (or its ack has failed).
func (r *runner) checkDone() {
	if r.producersDone.Load() && r.settled.Load() >= r.enqueued.Load() {
		r.doneOnce.Do(func() {
			r.doneAt.Store(time.Now().UnixNano())
			close(r.done)
		})
	}
}

// finishProducing marks the producers done.
func (r *runner) finishProducing() {
	r.producedAt.Store(time.Now().UnixNano())
	r.producersDone.Store(true)
	r.checkDone()
}

// run runs the mode and returns its result.
func (r *runner) run(ctx context.Context) *Result {
	ctx, r.stop = context.WithCancelCause(ctx)
	defer r.stop(nil)
	if r.stream != nil {
		defer r.stream.Close()
	}
	mon := r.startMonitor()
	obs := r.startObservers(ctx)
	if err := r.setLimits(ctx); err != nil {
		r.res.addError(err.Error())
		r.stop(err)
	}
	var w *window
	switch r.o.Mode {
	case ModeEnqueue, ModeEnqueueBatch:
		w = r.beginWindow()
		r.produce(ctx, produceSpec{jobs: r.o.Jobs, duration: r.o.Duration, clients: r.o.Concurrency,
			batch: r.o.Batch, single: r.o.Mode == ModeEnqueue, latency: r.hEnqueue})
		r.finishProducing()
	case ModeProcess:
		r.setPhase("prefill")
		r.produce(ctx, produceSpec{jobs: r.o.Jobs, clients: prefillClients, batch: r.o.Batch})
		r.setPhase("run")
		if ctx.Err() == nil {
			r.producersDone.Store(true)
			w = r.beginWindow()
			r.checkDone()
			r.work(ctx)
		}
	case ModeLifecycle, ModeLatency:
		w = r.beginWindow()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.o.Mode == ModeLatency {
				r.produceAtRate(ctx)
			} else {
				r.produce(ctx, produceSpec{jobs: r.o.Jobs, duration: r.o.Duration, clients: r.o.Producers,
					batch: r.o.Batch, single: r.o.Batch == 1, latency: r.hEnqueue})
			}
			r.finishProducing()
		}()
		r.work(ctx)
		wg.Wait()
	}
	if w != nil {
		r.endWindow(w)
	}
	obs.stop()
	mon.stop()
	r.fillResult(ctx)
	r.errMu.Lock()
	r.res.Errors, r.res.ErrorSamples = r.errs, r.samples
	r.errMu.Unlock()
	return r.res
}

// work runs the workers until every enqueued job is settled or ctx ends.
func (r *runner) work(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < r.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newWorker(r).Run(wctx)
		}()
	}
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
}

// window is the timed part of a run, with the resource use at its start.
type window struct {
	start     time.Time
	server    loadgen.Usage
	serverOK  bool
	clientCPU time.Duration
	clientOK  bool
	machine   cpuTimes
	machineOK bool
}

func (r *runner) beginWindow() *window {
	w := &window{}
	w.server, w.serverOK = r.t.usage()
	w.clientCPU, _, w.clientOK = selfUsage()
	m, err := readCPUTimes()
	w.machine, w.machineOK = m, err == nil
	r.rssMax.Store(w.server.RSS)
	r.requests.Store(0)
	r.inWindow.Store(true)
	w.start = time.Now()
	r.windowStart = w.start
	return w
}

// endWindow fills the result's timing and resource figures.
func (r *runner) endWindow(w *window) {
	end := time.Now()
	if at := r.doneAt.Load(); at != 0 {
		end = time.Unix(0, at)
	}
	r.inWindow.Store(false)
	wall := time.Since(w.start)
	res := r.res
	res.Seconds = end.Sub(w.start).Seconds()
	machine, machineErr := readCPUTimes()
	// The CPU time of the bench and its server in the window, which the
	// machine's is compared with; unknown without the server's, or when
	// the server is spread over PostgreSQL's processes too.
	var own time.Duration
	ownKnown := r.t.db == ""
	if u, ok := r.t.usage(); ok && w.serverOK {
		own += u.CPU - w.server.CPU
		res.ServerCPUPercent = ptr(percent(u.CPU-w.server.CPU, wall))
		res.ServerPeakRSSMB = ptr(mb(u.HWM))
		res.ServerSampledRSSMB = ptr(mb(max(r.rssMax.Load(), u.RSS)))
	} else {
		ownKnown = false
	}
	if cpu, peak, ok := selfUsage(); ok && w.clientOK {
		own += cpu - w.clientCPU
		res.ClientCPUPercent = ptr(percent(cpu-w.clientCPU, wall))
		res.ClientPeakRSSMB = ptr(mb(peak))
	} else {
		ownKnown = false
	}
	if w.machineOK && machineErr == nil {
		res.MachineDuring = machineLoad(loadSample{phase: PhaseDuring, from: w.machine, to: machine, wall: wall,
			cpus: runtime.NumCPU(), load1: readLoad1(), own: own, ownKnown: ownKnown})
	}
}

func percent(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return 100 * cpu.Seconds() / wall.Seconds()
}

func mb(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// fillResult sets the counts, rates and latencies, says why the run
// stopped early if it did, and otherwise checks the server's counts.
func (r *runner) fillResult(ctx context.Context) {
	res := r.res
	res.Enqueued, res.Processed = r.enqueued.Load(), r.processed.Load()
	res.Requests = r.requests.Load()
	moved := res.Processed
	if !workerMode(r.o.Mode) {
		moved = res.Enqueued
	}
	if res.Seconds > 0 {
		res.OpsPerSec = float64(res.Requests) / res.Seconds
		res.JobsPerSec = float64(moved) / res.Seconds
	}
	switch at := r.producedAt.Load(); {
	case !workerMode(r.o.Mode):
		res.EnqueuePerSec = res.JobsPerSec
	case r.o.Mode != ModeProcess && at != 0 && !r.windowStart.IsZero():
		if secs := time.Unix(0, at).Sub(r.windowStart).Seconds(); secs > 0 {
			res.EnqueuePerSec = float64(res.Enqueued) / secs
		}
	}
	res.Latency = Latencies{Enqueue: r.hEnqueue.Stats(), Fetch: r.hFetch.Stats(), Ack: r.hAck.Stats(), Start: r.hStart.Stats()}
	if r.o.Work > 0 {
		theory := float64(r.o.Workers*r.o.Concurrency) / r.o.Work.Seconds()
		res.TheoreticalJobsPerSec = ptr(theory)
		res.Efficiency = ptr(res.JobsPerSec / theory)
	}
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errTooManyErrors):
			res.Interrupted = cause.Error()
		case errors.Is(cause, context.DeadlineExceeded):
			res.Interrupted = "timed out"
		default:
			res.Interrupted = "interrupted"
		}
		return
	}
	r.verify()
}

// describeLimits names limits as the bench flags set them.
func describeLimits(l job.Limits) string {
	var parts []string
	rate := func(flag string, r job.Rate) {
		if !r.IsZero() {
			parts = append(parts, fmt.Sprintf("%s %d/%v", flag, r.Limit, r.Period))
		}
	}
	rate("limit-rate", l.Rate)
	if l.MaxActive > 0 {
		parts = append(parts, fmt.Sprintf("max-active %d", l.MaxActive))
	}
	rate("group-rate", l.GroupRate)
	if l.GroupMaxActive > 0 && !l.Ordered {
		parts = append(parts, fmt.Sprintf("group-max-active %d", l.GroupMaxActive))
	}
	if l.Ordered {
		parts = append(parts, "ordered")
	}
	return strings.Join(parts, ", ")
}
