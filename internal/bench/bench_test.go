package bench

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// run runs o against a fresh embedded test server and checks what every
// clean run must report.
func run(t *testing.T, o Options) *Result {
	t.Helper()
	if o.ServerCommand == nil {
		o.ServerCommand = testServerCommand
	}
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Errors != 0 || res.Interrupted != "" {
		var b bytes.Buffer
		Print(&b, res)
		t.Fatalf("run had %d errors (%s):\n%s", res.Errors, res.Interrupted, b.String())
	}
	if res.Mode != o.Mode || res.CPUs <= 0 || res.Seconds <= 0 || res.JobsPerSec <= 0 || res.Requests <= 0 || res.OpsPerSec <= 0 {
		t.Errorf("result not filled in: %+v", res)
	}
	if res.ServerCPUPercent == nil || res.ServerPeakRSSMB == nil || *res.ServerPeakRSSMB <= 0 || res.ServerSampledRSSMB == nil {
		t.Errorf("server figures missing: cpu %v rss %v sampled %v", res.ServerCPUPercent, res.ServerPeakRSSMB, res.ServerSampledRSSMB)
	}
	if res.ClientCPUPercent == nil || res.ClientPeakRSSMB == nil {
		t.Errorf("client figures missing")
	}
	v := res.Verification
	if v == nil || !v.OK || v.Expected != res.Enqueued {
		t.Fatalf("verification %+v, enqueued %d", v, res.Enqueued)
	}
	if res.Server != "embedded" || res.Sync == "" {
		t.Errorf("server %q sync %q", res.Server, res.Sync)
	}
	var b bytes.Buffer
	Print(&b, res)
	if strings.Contains(b.String(), "!!!") || !strings.Contains(b.String(), "spool bench "+o.Mode) {
		t.Errorf("table:\n%s", b.String())
	}
	return res
}

// wantProcessedOnce checks that every enqueued job was processed exactly
// once: the workers acked each (no failed or repeated ack) and the server
// counts them all completed and none anywhere else.
func wantProcessedOnce(t *testing.T, res *Result, jobs int64) {
	t.Helper()
	if res.Enqueued != jobs || res.Processed != jobs {
		t.Fatalf("enqueued %d, processed %d, want %d each", res.Enqueued, res.Processed, jobs)
	}
	c := res.Verification.Counts
	if c["completed"] != jobs || len(c) != 1 && sumOthers(c, "completed") != 0 {
		t.Fatalf("server counts %v, want %d completed and nothing else", c, jobs)
	}
	if res.Latency.Fetch == nil || res.Latency.Ack == nil {
		t.Fatalf("no fetch or ack latency: %+v", res.Latency)
	}
}

func sumOthers(c map[string]int64, except string) int64 {
	var n int64
	for k, v := range c {
		if k != except {
			n += v
		}
	}
	return n
}

func TestRunEnqueue(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeEnqueue, Jobs: 300, Concurrency: 4, Sync: "normal"})
	if res.Enqueued != 300 || res.Requests != 300 || res.Verification.Counts["available"] != 300 {
		t.Fatalf("enqueued %d in %d requests; counts %v", res.Enqueued, res.Requests, res.Verification.Counts)
	}
	if l := res.Latency.Enqueue; l == nil || l.Count != 300 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Fatalf("enqueue latency %+v", l)
	}
	if res.Sync != "normal" || res.EnqueuePerSec != res.JobsPerSec {
		t.Fatalf("sync %q, enqueue rate %v vs %v", res.Sync, res.EnqueuePerSec, res.JobsPerSec)
	}
}

// The stream transport carries the same requests, answered the same.
func TestRunEnqueueOverStream(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeEnqueue, Jobs: 300, Concurrency: 8, Sync: "normal", Transport: TransportStream})
	if res.Enqueued != 300 || res.Requests != 300 || res.Verification.Counts["available"] != 300 || res.Transport != TransportStream {
		t.Fatalf("enqueued %d in %d requests over %q; counts %v", res.Enqueued, res.Requests, res.Transport, res.Verification.Counts)
	}
	var b bytes.Buffer
	Print(&b, res)
	if !strings.Contains(strings.SplitN(b.String(), "\n", 2)[0], ", transport stream,") {
		t.Fatalf("the header line does not name the transport:\n%s", b.String())
	}
}

// Workers fetch and ack over the stream too.
func TestRunLifecycleOverStream(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeLifecycle, Jobs: 200, Producers: 4, Workers: 2, Concurrency: 8, Transport: TransportStream})
	wantProcessedOnce(t, res, 200)
}

func TestRunEnqueueBatch(t *testing.T) {
	t.Parallel()
	// 350 jobs in batches of 100 over 3 queues: 4 requests, the last of 50.
	res := run(t, Options{Mode: ModeEnqueueBatch, Jobs: 350, Batch: 100, Concurrency: 2, Queues: 3})
	if res.Enqueued != 350 || res.Requests != 4 || res.Latency.Enqueue.Count != 4 {
		t.Fatalf("enqueued %d in %d requests", res.Enqueued, res.Requests)
	}
	if res.Verification.Counts["available"] != 350 {
		t.Fatalf("counts %v", res.Verification.Counts)
	}
}

func TestRunProcess(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeProcess, Jobs: 400, Batch: 64, Workers: 2, Concurrency: 16, Queues: 2})
	wantProcessedOnce(t, res, 400)
	if res.Latency.Enqueue != nil {
		t.Fatalf("the prefill was timed: %+v", res.Latency.Enqueue)
	}
	// Instant jobs finish together: the jobs of one fetch are acked in
	// one request (or share one with the next fetch's), never in several.
	if res.Latency.Ack.Count > res.Latency.Fetch.Count {
		t.Fatalf("%d acks for %d fetches", res.Latency.Ack.Count, res.Latency.Fetch.Count)
	}
}

func TestRunProcessWithWork(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeProcess, Jobs: 200, Workers: 1, Concurrency: 50, Work: 5 * time.Millisecond})
	wantProcessedOnce(t, res, 200)
	if res.TheoreticalJobsPerSec == nil || *res.TheoreticalJobsPerSec != 10_000 || res.Efficiency == nil || *res.Efficiency <= 0 {
		t.Fatalf("theoretical %v efficiency %v", res.TheoreticalJobsPerSec, res.Efficiency)
	}
}

func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeLifecycle, Jobs: 300, Producers: 3, Workers: 2, Concurrency: 8})
	wantProcessedOnce(t, res, 300)
	if res.Latency.Enqueue == nil || res.Latency.Enqueue.Count != 300 || res.EnqueuePerSec <= 0 {
		t.Fatalf("enqueue latency %+v, rate %v", res.Latency.Enqueue, res.EnqueuePerSec)
	}
}

func TestRunLifecycleForDurationWithBatches(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeLifecycle, Duration: 300 * time.Millisecond, Batch: 5, Producers: 2, Workers: 2, Concurrency: 4, Queues: 2})
	if res.Enqueued == 0 || res.Enqueued%5 != 0 {
		t.Fatalf("enqueued %d, want a positive multiple of the batch", res.Enqueued)
	}
	wantProcessedOnce(t, res, res.Enqueued)
}

// A run that scrapes /metrics and follows the events reports what its
// observers saw.
func TestRunWithObservers(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeLifecycle, Duration: 600 * time.Millisecond, Producers: 2, Workers: 1, Concurrency: 4,
		ScrapeMetrics: 100 * time.Millisecond, WatchEvents: true})
	wantProcessedOnce(t, res, res.Enqueued)
	o := res.Observers
	if o == nil || o.ScrapeEvery != "100ms" || o.Scrapes < 1 || o.ScrapeLatency == nil || o.ScrapeBytes < 1000 || !o.Watched || o.Events < 1 {
		t.Fatalf("observers %+v", o)
	}
	if o.Events > 3*res.Enqueued {
		t.Errorf("read %d events of %d jobs, want at most 3 a job", o.Events, res.Enqueued)
	}
	var b bytes.Buffer
	Print(&b, res)
	if !strings.Contains(b.String(), "scraped every 100ms") || !strings.Contains(b.String(), "events read") {
		t.Errorf("table lacks the observers:\n%s", b.String())
	}
}

func TestRunLatency(t *testing.T) {
	t.Parallel()
	res := run(t, Options{Mode: ModeLatency, Jobs: 200, Rate: 400, Workers: 1, Concurrency: 10})
	wantProcessedOnce(t, res, 200)
	s := res.Latency.Start
	if s == nil || s.Count != 200 || s.P50 <= 0 || s.P50 > s.P99 || s.P99 > s.Max {
		t.Fatalf("enqueue → start latency %+v", s)
	}
	if res.Latency.Enqueue == nil || res.Latency.Enqueue.Count != 200 {
		t.Fatalf("enqueue latency %+v", res.Latency.Enqueue)
	}
	// 200 jobs at 400/s are due over 497.5 ms, so the run cannot be shorter.
	if res.Seconds < 0.4975 {
		t.Fatalf("run took %.3fs, shorter than its schedule", res.Seconds)
	}
}

// TestRunAgainstServer runs against a server given by URL: its CPU and
// memory are known with its pid and unknown without.
func TestRunAgainstServer(t *testing.T) {
	t.Parallel()
	c, err := startEmbedded(context.Background(), testServerCommand, []string{"--sync", "full"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	res, err := Run(context.Background(), Options{Mode: ModeLifecycle, Server: c.url() + "/", ServerPID: c.pid(), Jobs: 100, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Server != c.url() || res.Sync != "" || res.ServerCPUPercent == nil || res.ServerPeakRSSMB == nil {
		t.Fatalf("with pid: %+v", res)
	}
	wantProcessedOnce(t, res, 100)
	res, err = Run(context.Background(), Options{Mode: ModeEnqueue, Server: c.url(), Jobs: 50, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.ServerCPUPercent != nil || res.ServerPeakRSSMB != nil || res.ClientCPUPercent == nil {
		t.Fatalf("without pid: %+v", res)
	}
	var b bytes.Buffer
	Print(&b, res)
	if !regexp.MustCompile(`server CPU +unknown`).MatchString(b.String()) {
		t.Fatalf("unknown server figures not shown:\n%s", b.String())
	}
	if !c.running() {
		t.Fatal("a run against a given server stopped it")
	}
}

// TestRunInterrupted stops a long run from outside: it reports what it
// measured, says why it stopped, and does not verify.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	progress := &firstWrite{wrote: make(chan struct{})}
	o := Options{Mode: ModeLifecycle, Jobs: MaxJobs, ServerCommand: testServerCommand, Progress: progress, Timeout: time.Minute}
	go func() {
		// Stop once the run has drawn its progress line with jobs done.
		<-progress.wrote
		cancel()
	}()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted != "interrupted" || res.Verification != nil || res.Enqueued == 0 || res.Seconds <= 0 {
		t.Fatalf("interrupted run: %+v", res)
	}
	var b bytes.Buffer
	Print(&b, res)
	if !strings.Contains(b.String(), "STOPPED EARLY") {
		t.Fatalf("table does not say the run stopped early:\n%s", b.String())
	}
	if out := progress.String(); !strings.Contains(out, "lifecycle run") || !strings.Contains(out, "processed") {
		t.Fatalf("no progress line: %q", out)
	}
}

// firstWrite is a writer that closes wrote when a progress line reports
// processed jobs.
type firstWrite struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
	once  sync.Once
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes.Contains(p, []byte("processed")) && !bytes.Contains(p, []byte("processed 0 ")) {
		f.once.Do(func() { close(f.wrote) })
	}
	return f.buf.Write(p)
}

func (f *firstWrite) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Options{Mode: ModeEnqueue, Jobs: MaxJobs, Timeout: 1500 * time.Millisecond, ServerCommand: testServerCommand})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted != "timed out" || res.Enqueued == 0 {
		t.Fatalf("timed-out run: %+v", res)
	}
}

func TestRunServerThatDoesNotStart(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Options{Mode: ModeEnqueue, Sync: "full", ServerCommand: func(args []string) (*exec.Cmd, error) {
		return testServerCommand(append(args, "--sync", "sometimes"))
	}})
	if err == nil || !strings.Contains(err.Error(), "start embedded server") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunWithToken runs against a server that requires auth: with the
// token every request passes; without it every one fails, loudly.
func TestRunWithToken(t *testing.T) {
	t.Parallel()
	const secret = "bench-secret-0123456789abcdef"
	authed := func(args []string) (*exec.Cmd, error) {
		cmd, err := testServerCommand(append(args, "--auth"))
		if err == nil {
			cmd.Env = append(cmd.Env, "SPOOL_AUTH_TOKENS=bench admin * "+secret)
		}
		return cmd, err
	}
	c, err := startEmbedded(context.Background(), authed, []string{"--sync", "normal"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	res, err := Run(context.Background(), Options{Mode: ModeLifecycle, Server: c.url(), Token: secret, Jobs: 100, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("with the token: %d errors: %q", res.Errors, res.ErrorSamples)
	}
	wantProcessedOnce(t, res, 100)
	res, err = Run(context.Background(), Options{Mode: ModeEnqueue, Server: c.url(), Jobs: 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Enqueued != 0 || len(res.ErrorSamples) == 0 || !strings.Contains(res.ErrorSamples[0], "401") {
		t.Fatalf("without the token: %d errors %q, %d enqueued", res.Errors, res.ErrorSamples, res.Enqueued)
	}
}
