// Package metrics exposes what a Spool node does in the Prometheus text
// format, on GET /metrics: jobs by queue and state and the age of each
// queue's oldest available job (read from the store at scrape time,
// cached), counters and histograms of the job events the engine
// publishes, the ticks of cron schedules the node fired, late or skipped,
// the group commits of the store, the HTTP requests by route, and the Go
// runtime and process.
//
// Everything on the queue's hot path costs a few atomic additions: the
// engine tells Observe of its events synchronously, so each queue's
// counters and histograms are looked up once and kept, and no call takes
// a lock the scrape holds. Reading /metrics never touches the write path:
// the queue listing comes from the store's reads, at most once per
// Config.CacheFor however often it is scraped.
//
// Each Metrics has its own registry; nothing goes to Prometheus's global
// one, so several servers in one process (tests) do not collide.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store"
)

// Defaults and bounds.
const (
	// DefaultCacheFor is how long one queue listing answers scrapes.
	DefaultCacheFor = time.Second
	// DefaultMaxQueues bounds the queues the event counters keep series
	// for; the events of queues past it count under OtherQueue.
	DefaultMaxQueues = 10_000
	// OtherQueue is the queue label of the events of the queues past
	// Config.MaxQueues. No queue has this name: names start with a letter
	// or a digit.
	OtherQueue = "_other"
	// UnmatchedRoute is the route label of requests that matched no
	// route (or were refused before routing), so that unknown paths do
	// not each make a series.
	UnmatchedRoute = "unmatched"
	// listTimeout bounds one queue listing made for a scrape.
	listTimeout = 10 * time.Second
)

// Buckets of the histograms, in seconds or jobs.
var (
	// JobBuckets are those of the wait and run times of jobs: 1 ms to 1 h.
	JobBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	// RequestBuckets are those of HTTP requests: 0.5 ms to 60 s, the
	// longest long poll.
	RequestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// CommitBuckets are those of store commits: 0.1 ms to 2.5 s.
	CommitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	// BatchBuckets are those of the jobs of one commit: 1 to 16,384.
	BatchBuckets = prometheus.ExponentialBuckets(1, 2, 15)
)

// Config configures Metrics.
type Config struct {
	// Queues lists every queue with its counts and oldest available job
	// (store.Admin.QueueList), for spool_jobs and
	// spool_queue_oldest_available_age_seconds. Nil leaves both out.
	Queues func(ctx context.Context) ([]job.QueueInfo, error)
	// CacheFor is how long one listing of Queues answers scrapes, so that
	// frequent scrapes cost the store nothing. Defaults to
	// DefaultCacheFor.
	CacheFor time.Duration
	// Now tells the time the ages are measured at; it must be the clock
	// the engine gives jobs their run times by. Defaults to the wall
	// clock.
	Now func() time.Time
	// MaxQueues bounds the queues the event counters and histograms keep
	// series for. Defaults to DefaultMaxQueues.
	MaxQueues int
	// Logger receives the errors of scrapes. Defaults to slog.Default().
	Logger *slog.Logger
}

// Metrics holds a node's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry

	enqueued, started, completed, failed, dead, cancelled, released, leaseExpired *prometheus.CounterVec
	wait, run                                                                     *prometheus.HistogramVec

	// queues holds each queue's resolved series (*queueSeries) by label;
	// nQueues counts them against MaxQueues.
	queues  sync.Map
	nQueues atomic.Int64

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// routes holds the resolved series of each route (*routeSeries).
	routes sync.Map

	commitSeconds, commitJobs *prometheus.HistogramVec

	ticksFired, ticksLate, ticksSkipped prometheus.Counter
}

// New returns the metrics of a node, with its own registry.
func New(cfg Config) *Metrics {
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = DefaultCacheFor
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxQueues <= 0 {
		cfg.MaxQueues = DefaultMaxQueues
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry()}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"queue"})
	}
	m.enqueued = counter("spool_jobs_enqueued_total", "Jobs stored, dead-letter copies included, by queue.")
	m.started = counter("spool_jobs_started_total", "Attempts started: jobs handed out by a fetch, by queue.")
	m.completed = counter("spool_jobs_completed_total", "Jobs acknowledged, by queue.")
	m.failed = counter("spool_jobs_failed_total", "Failed attempts whose job will run again, by queue.")
	m.dead = counter("spool_jobs_dead_total", "Jobs that failed for the last time, by queue.")
	m.cancelled = counter("spool_jobs_cancelled_total", "Jobs cancelled, at once or when their worker handed them back, by queue.")
	m.released = counter("spool_jobs_released_total", "Attempts handed back unrun by their worker, by queue.")
	m.leaseExpired = counter("spool_jobs_lease_expired_total",
		"Jobs whose lease ran out before their worker answered, taken back by this node's rescuer, by queue.")
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spool_job_wait_seconds",
		Help: "Time from a job's run time (its enqueue, or the end of its delay or backoff) to the start of its attempt, by queue.", Buckets: JobBuckets},
		[]string{"queue"})
	m.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spool_job_run_seconds",
		Help: "Time from the start of an attempt to its ack or failure by its worker, by queue.", Buckets: JobBuckets},
		[]string{"queue"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spool_http_requests_total",
		Help: "HTTP requests answered (frames of streams included), by route pattern and status code."}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spool_http_request_duration_seconds",
		Help: "Time to answer an HTTP request (a frame of a stream), by route pattern.", Buckets: RequestBuckets}, []string{"route"})
	m.commitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spool_store_commit_seconds",
		Help: "Time of one commit of the store's writes (a group commit of the embedded store), by store.", Buckets: CommitBuckets},
		[]string{"store"})
	m.commitJobs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spool_store_commit_jobs",
		Help: "Jobs and items carried by one group commit of the embedded store, by store.", Buckets: BatchBuckets},
		[]string{"store"})
	m.ticksFired = prometheus.NewCounter(prometheus.CounterOpts{Name: "spool_schedule_ticks_fired_total",
		Help: "Ticks of cron schedules that enqueued their job, fired by this node."})
	m.ticksLate = prometheus.NewCounter(prometheus.CounterOpts{Name: "spool_schedule_ticks_late_total",
		Help: "Ticks of cron schedules that this node fired more than a second after their time (counted in spool_schedule_ticks_fired_total too)."})
	m.ticksSkipped = prometheus.NewCounter(prometheus.CounterOpts{Name: "spool_schedule_ticks_skipped_total",
		Help: "Ticks of cron schedules that this node handled without a job of their own: missed ticks their misfire policy dropped or folded into one job, or whose job was refused."})
	m.reg.MustRegister(m.enqueued, m.started, m.completed, m.failed, m.dead, m.cancelled, m.released, m.leaseExpired,
		m.wait, m.run, m.requests, m.duration, m.commitSeconds, m.commitJobs, m.ticksFired, m.ticksLate, m.ticksSkipped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Queues != nil {
		m.reg.MustRegister(&queueCollector{cfg: &m.cfg})
	}
	return m
}

// Gatherer is the registry of the metrics, for tests and for embedding in
// another exposition.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Handler serves the metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it). A collector that fails
// (the store cannot list its queues) is logged and left out; the rest is
// served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(m.cfg.Logger.Handler(), slog.LevelWarn),
	})
}

// queueSeries are the resolved series of one queue label.
type queueSeries struct {
	enqueued, started, completed, failed, dead, cancelled, released prometheus.Counter
	wait, run                                                       prometheus.Observer
}

// series returns the series of queue label, making them on its first
// event; past MaxQueues, those of OtherQueue.
func (m *Metrics) series(label string) *queueSeries {
	if s, ok := m.queues.Load(label); ok {
		return s.(*queueSeries)
	}
	if label != OtherQueue && m.nQueues.Load() >= int64(m.cfg.MaxQueues) {
		return m.series(OtherQueue)
	}
	s := &queueSeries{
		enqueued: m.enqueued.WithLabelValues(label), started: m.started.WithLabelValues(label),
		completed: m.completed.WithLabelValues(label), failed: m.failed.WithLabelValues(label),
		dead: m.dead.WithLabelValues(label), cancelled: m.cancelled.WithLabelValues(label),
		released: m.released.WithLabelValues(label),
		wait:     m.wait.WithLabelValues(label), run: m.run.WithLabelValues(label),
	}
	if got, loaded := m.queues.LoadOrStore(label, s); loaded {
		return got.(*queueSeries)
	}
	m.nQueues.Add(1)
	return s
}

// queueLabel is the queue label of e: its queue, or the lane
// (queue@group) of a consumer group's copy, as the store lists it.
func queueLabel(e *events.Event) string {
	if e.ConsumerGroup != "" {
		return job.LaneName(e.Queue, e.ConsumerGroup)
	}
	return e.Queue
}

// Observe counts the job events evs. It is engine.Config.Observe: the
// engine calls it with every event it publishes, before the call that
// made them returns; it never blocks.
func (m *Metrics) Observe(evs []events.Event) {
	var s *queueSeries
	label := ""
	for i := range evs {
		e := &evs[i]
		if l := queueLabel(e); s == nil || l != label {
			s, label = m.series(l), l
		}
		switch e.Type {
		case events.Enqueued:
			s.enqueued.Inc()
		case events.Started:
			s.started.Inc()
			s.wait.Observe(max(e.Waited, 0).Seconds())
		case events.Completed:
			s.completed.Inc()
		case events.Failed:
			s.failed.Inc()
		case events.Dead:
			s.dead.Inc()
		case events.Cancelled:
			s.cancelled.Inc()
		case events.Released:
			s.released.Inc()
		}
		switch e.Type {
		case events.Completed, events.Failed, events.Dead, events.Cancelled:
			if e.Ran > 0 {
				s.run.Observe(e.Ran.Seconds())
			}
		}
	}
}

// Rescued counts the jobs whose lease expired, by queue: the rescuer's
// results (maintenance.NewRescuer).
func (m *Metrics) Rescued(byQueue map[string]int) {
	for q, n := range byQueue {
		label := q
		if _, ok := m.queues.Load(q); !ok && m.nQueues.Load() >= int64(m.cfg.MaxQueues) {
			label = OtherQueue
		}
		m.leaseExpired.WithLabelValues(label).Add(float64(n))
	}
}

// ObserveTicks counts the ticks of cron schedules that one pass of firing
// handled (maintenance.NewCron's observe). It never blocks.
func (m *Metrics) ObserveTicks(t schedule.Tally) {
	m.ticksFired.Add(float64(t.Fired))
	m.ticksLate.Add(float64(t.Late))
	m.ticksSkipped.Add(float64(t.Skipped))
}

// routeSeries are the resolved series of one route.
type routeSeries struct {
	duration prometheus.Observer
	// codes holds the request counter of each status code.
	codes sync.Map
}

// ObserveRequest counts one answered request of route (a pattern of the
// router, "POST /v1/jobs/{id}/ack"; "" for a request that matched none)
// with status, which took elapsed.
func (m *Metrics) ObserveRequest(route string, status int, elapsed time.Duration) {
	if route == "" {
		route = UnmatchedRoute
	}
	var r *routeSeries
	if v, ok := m.routes.Load(route); ok {
		r = v.(*routeSeries)
	} else {
		v, _ := m.routes.LoadOrStore(route, &routeSeries{duration: m.duration.WithLabelValues(route)})
		r = v.(*routeSeries)
	}
	r.duration.Observe(elapsed.Seconds())
	var c prometheus.Counter
	if v, ok := r.codes.Load(status); ok {
		c = v.(prometheus.Counter)
	} else {
		v, _ := r.codes.LoadOrStore(status, m.requests.WithLabelValues(route, statusText(status)))
		c = v.(prometheus.Counter)
	}
	c.Inc()
}

// statusText is status as a label value.
func statusText(status int) string {
	if status < 100 || status > 999 {
		return "other"
	}
	return string([]byte{byte('0' + status/100), byte('0' + status/10%10), byte('0' + status%10)})
}

// CommitObserver returns what a store calls with each of its commits
// (sqlitestore.Config.OnCommit, pgstore.Config.OnCommit), labelled name
// ("disk", "memory", "postgres"). Commits that count no jobs leave
// spool_store_commit_jobs alone.
func (m *Metrics) CommitObserver(name string) func(store.CommitStats) {
	seconds := m.commitSeconds.WithLabelValues(name)
	// The jobs series is made on the first commit that counts jobs.
	jobs := sync.OnceValue(func() prometheus.Observer { return m.commitJobs.WithLabelValues(name) })
	return func(c store.CommitStats) {
		seconds.Observe(c.Elapsed.Seconds())
		if c.Jobs > 0 {
			jobs().Observe(float64(c.Jobs))
		}
	}
}
