// Package bench is Spool's built-in load generator: it drives a server over
// HTTP (an embedded one on a temporary data folder by default) and reports
// throughput and latency. The client side keeps connections alive and
// prebuilds request bodies so that it is not the bottleneck.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// Modes of a benchmark run.
const (
	// ModeEnqueue sends one job per request from Concurrency clients.
	ModeEnqueue = "enqueue"
	// ModeEnqueueBatch sends Batch jobs per request from Concurrency clients.
	ModeEnqueueBatch = "enqueue-batch"
	// ModeProcess prefills Jobs jobs, then Workers drain them with batch
	// fetch and batch ack; only the drain is timed.
	ModeProcess = "process"
	// ModeLifecycle runs producers and consumers at once: enqueue → fetch →
	// ack, timed until every job is acked.
	ModeLifecycle = "lifecycle"
)

// Options configure a run.
type Options struct {
	// Mode is one of the Mode constants.
	Mode string
	// Server is the base URL of a running server; empty starts an embedded
	// one on a temporary data folder.
	Server string
	// Sync is the embedded server's durability (full or normal).
	Sync string
	// Jobs is how many jobs the run moves. Defaults to 100000.
	Jobs int
	// Batch is the jobs per enqueue request and the most jobs per fetch.
	// Defaults to 1000 (1 in ModeEnqueue).
	Batch int
	// Concurrency is the number of producer clients. Defaults to 8.
	Concurrency int
	// Workers is the number of consumer clients. Defaults to 4.
	Workers int
	// PayloadBytes is the size of each job's payload. Defaults to 100.
	PayloadBytes int
	// Progress, when set, receives a live progress line every second.
	Progress io.Writer
}

// Result is what a run measured.
type Result struct {
	Mode        string  `json:"mode"`
	Jobs        int     `json:"jobs"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Workers     int     `json:"workers"`
	Seconds     float64 `json:"seconds"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	Requests    int     `json:"requests"`
	LatencyAvg  float64 `json:"latency_avg_ms"`
	LatencyP50  float64 `json:"latency_p50_ms"`
	LatencyP99  float64 `json:"latency_p99_ms"`
	LatencyP999 float64 `json:"latency_p999_ms"`
	Errors      int     `json:"errors"`
}

func (o *Options) defaults() {
	if o.Jobs <= 0 {
		o.Jobs = 100_000
	}
	if o.Batch <= 0 {
		o.Batch = 1000
		if o.Mode == ModeEnqueue {
			o.Batch = 1
		}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.PayloadBytes <= 0 {
		o.PayloadBytes = 100
	}
	if o.Sync == "" {
		o.Sync = "full"
	}
}

// Run runs one benchmark.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	switch o.Mode {
	case ModeEnqueue, ModeEnqueueBatch, ModeProcess, ModeLifecycle:
	default:
		return nil, fmt.Errorf("unknown mode %q: want enqueue, enqueue-batch, process or lifecycle", o.Mode)
	}
	base := o.Server
	if base == "" {
		stop, addr, err := startEmbedded(ctx, o.Sync)
		if err != nil {
			return nil, err
		}
		defer stop()
		base = "http://" + addr
	}
	r := newRunner(base, o)
	return r.run(ctx)
}

func startEmbedded(ctx context.Context, sync string) (func(), string, error) {
	dir, err := os.MkdirTemp("", "spool-bench-")
	if err != nil {
		return nil, "", fmt.Errorf("make data folder: %w", err)
	}
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = dir
	cfg.Sync = sync
	cfg.LogLevel = "warn"
	srv := server.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := srv.Start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, "", fmt.Errorf("start embedded server: %w", err)
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Stop(sctx)
		os.RemoveAll(dir)
	}
	return stop, srv.Addr(), nil
}

type runner struct {
	base   string
	o      Options
	http   *http.Client
	queue  string
	body   []byte // one prebuilt enqueue body of o.Batch jobs
	single []byte // one prebuilt single-job body

	enqueued atomic.Int64
	acked    atomic.Int64
	errs     atomic.Int64

	mu        sync.Mutex
	latencies []time.Duration
}

func newRunner(base string, o Options) *runner {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
	r := &runner{base: strings.TrimRight(base, "/"), o: o, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
	r.queue = "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	payload := `{"data":"` + strings.Repeat("x", max(o.PayloadBytes-11, 1)) + `"}`
	job := `{"queue":"` + r.queue + `","kind":"bench","payload":` + payload + `}`
	r.single = []byte(job)
	var b bytes.Buffer
	b.WriteString(`{"jobs":[`)
	for i := 0; i < o.Batch; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(job)
	}
	b.WriteString(`]}`)
	r.body = b.Bytes()
	return r
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	var start time.Time
	var err error
	done := make(chan struct{})
	go r.report(done)
	defer close(done)
	switch r.o.Mode {
	case ModeEnqueue, ModeEnqueueBatch:
		start = time.Now()
		err = r.produce(ctx, r.o.Jobs)
	case ModeProcess:
		if err = r.produce(ctx, r.o.Jobs); err != nil {
			break
		}
		r.resetLatencies()
		start = time.Now()
		err = r.consume(ctx, r.o.Jobs)
	case ModeLifecycle:
		start = time.Now()
		var wg sync.WaitGroup
		var perr error
		wg.Add(1)
		go func() { defer wg.Done(); perr = r.produce(ctx, r.o.Jobs) }()
		err = r.consume(ctx, r.o.Jobs)
		wg.Wait()
		err = errors.Join(err, perr)
	}
	elapsed := time.Since(start)
	if err != nil {
		return nil, err
	}
	return r.result(elapsed), nil
}

// produce enqueues total jobs from Concurrency clients.
func (r *runner) produce(ctx context.Context, total int) error {
	per := r.o.Batch
	path, body := "/v1/jobs/batch", r.body
	if r.o.Mode == ModeEnqueue {
		per, path, body = 1, "/v1/jobs", r.single
	}
	requests := int64((total + per - 1) / per)
	var next atomic.Int64
	return r.parallel(r.o.Concurrency, func() error {
		for next.Add(1) <= requests && ctx.Err() == nil {
			if _, err := r.post(path, body); err != nil {
				return err
			}
			r.enqueued.Add(int64(per))
		}
		return ctx.Err()
	})
}

type fetched struct {
	Jobs []struct {
		ID    string `json:"id"`
		Lease struct {
			Token int64 `json:"token"`
		} `json:"lease"`
	} `json:"jobs"`
}

// consume fetches and acks until total jobs are acked.
func (r *runner) consume(ctx context.Context, total int) error {
	fetchBody := []byte(`{"queues":["` + r.queue + `"],"max":` + strconv.Itoa(min(r.o.Batch, 1000)) + `,"wait_ms":1000}`)
	return r.parallel(r.o.Workers, func() error {
		var ack bytes.Buffer
		for r.acked.Load() < int64(total) && ctx.Err() == nil {
			data, err := r.post("/v1/fetch", fetchBody)
			if err != nil {
				return err
			}
			var f fetched
			if err := json.Unmarshal(data, &f); err != nil {
				return fmt.Errorf("decode fetch answer: %w", err)
			}
			if len(f.Jobs) == 0 {
				continue
			}
			ack.Reset()
			ack.WriteString(`{"items":[`)
			for i, j := range f.Jobs {
				if i > 0 {
					ack.WriteByte(',')
				}
				ack.WriteString(`{"id":"`)
				ack.WriteString(j.ID)
				ack.WriteString(`","token":`)
				ack.WriteString(strconv.FormatInt(j.Lease.Token, 10))
				ack.WriteByte('}')
			}
			ack.WriteString(`]}`)
			if _, err := r.post("/v1/jobs/ack", ack.Bytes()); err != nil {
				return err
			}
			r.acked.Add(int64(len(f.Jobs)))
		}
		return ctx.Err()
	})
}

func (r *runner) parallel(n int, fn func() error) error {
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- fn() }()
	}
	var all []error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (r *runner) post(path string, body []byte) ([]byte, error) {
	start := time.Now()
	resp, err := r.http.Post(r.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		r.errs.Add(1)
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.errs.Add(1)
		return nil, fmt.Errorf("POST %s: read answer: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		r.errs.Add(1)
		return nil, fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	r.mu.Lock()
	r.latencies = append(r.latencies, time.Since(start))
	r.mu.Unlock()
	return data, nil
}

func (r *runner) resetLatencies() {
	r.mu.Lock()
	r.latencies = r.latencies[:0]
	r.mu.Unlock()
}

func (r *runner) report(done <-chan struct{}) {
	if r.o.Progress == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			fmt.Fprintln(r.o.Progress)
			return
		case <-tick.C:
			fmt.Fprintf(r.o.Progress, "\r%5.0fs  enqueued %d  acked %d  errors %d   ",
				time.Since(start).Seconds(), r.enqueued.Load(), r.acked.Load(), r.errs.Load())
		}
	}
}

func (r *runner) result(elapsed time.Duration) *Result {
	r.mu.Lock()
	lat := append([]time.Duration(nil), r.latencies...)
	r.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p * float64(len(lat)-1))
		return ms(lat[i])
	}
	res := &Result{
		Mode: r.o.Mode, Jobs: r.o.Jobs, Batch: r.o.Batch, Concurrency: r.o.Concurrency, Workers: r.o.Workers,
		Seconds: elapsed.Seconds(), JobsPerSec: float64(r.o.Jobs) / elapsed.Seconds(),
		Requests: len(lat), LatencyP50: pct(0.50), LatencyP99: pct(0.99), LatencyP999: pct(0.999),
		Errors: int(r.errs.Load()),
	}
	if len(lat) > 0 {
		res.LatencyAvg = ms(sum / time.Duration(len(lat)))
	}
	if r.o.Mode == ModeEnqueue || r.o.Mode == ModeEnqueueBatch {
		res.Workers = 0
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Print writes res as an aligned table.
func Print(w io.Writer, res *Result) {
	fmt.Fprintf(w, "mode         %s\n", res.Mode)
	fmt.Fprintf(w, "jobs         %d (batch %d, producers %d, workers %d)\n", res.Jobs, res.Batch, res.Concurrency, res.Workers)
	fmt.Fprintf(w, "elapsed      %.2fs\n", res.Seconds)
	fmt.Fprintf(w, "throughput   %.0f jobs/s\n", res.JobsPerSec)
	fmt.Fprintf(w, "requests     %d (errors %d)\n", res.Requests, res.Errors)
	fmt.Fprintf(w, "latency ms   avg %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f\n", res.LatencyAvg, res.LatencyP50, res.LatencyP99, res.LatencyP999)
}
