//go:build linux

package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// BacklogConfig configures the deep-backlog scenario. Zero values take the
// defaults.
type BacklogConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// Jobs is the backlog's size. Defaults to 1,000,000.
	Jobs int
	// Batch is the jobs per enqueue call. Defaults to 5000.
	Batch int
	// Producers is how many enqueue calls run at once. Defaults to 2.
	Producers int
	// MaxRSS is the pass mark for the server's resident memory, in bytes.
	// Defaults to 300 MiB.
	MaxRSS int64
	// ReadyLimit is the pass mark for a restart with the backlog to answer
	// /readyz. Defaults to 10s.
	ReadyLimit time.Duration
	// ReferenceJobs is the backlog of the reference fetch rate, filled the
	// same way in a data folder and server of its own. Defaults to
	// 100,000.
	ReferenceJobs int
	// DrainJobs is how many jobs the fetch-rate rounds fetch and ack from
	// the top of each backlog, split evenly over the rounds; less than
	// ReferenceJobs and Jobs, so that neither queue runs dry. Defaults to
	// 50,000.
	DrainJobs int
	// FetchRounds is how many fetch-rate rounds run on each server,
	// alternating between the reference and the full backlog; the ratio
	// compares the median rounds. At most DrainJobs. Defaults to 5.
	FetchRounds int
	// Fetchers is how many fetch-and-ack loops run at once in a fetch-rate
	// round. Defaults to 4.
	Fetchers int
	// FetchMax is the most jobs one fetch asks for (1 to 1000). Defaults
	// to 100.
	FetchMax int
	// MinFetchRatio is the pass mark for the median fetch rate on the full
	// backlog, as a share of the median rate on the reference backlog.
	// Defaults to 0.70.
	MinFetchRatio float64
	// Log receives progress lines; nil for none.
	Log io.Writer
}

// BacklogMark is the server's memory when the backlog reached Jobs.
type BacklogMark struct {
	Jobs  int     `json:"jobs"`
	RSSMB float64 `json:"rss_mb"`
	HWMMB float64 `json:"hwm_mb"`
}

// BacklogResult is the report of the deep-backlog scenario.
type BacklogResult struct {
	Verdict
	Jobs int `json:"jobs"`
	// EnqueueSeconds is how long filling the backlog took.
	EnqueueSeconds float64 `json:"enqueue_seconds"`
	// Marks are the server's memory at 100 k, 1 M and 10 M jobs (those not
	// past Jobs) and at Jobs.
	Marks []BacklogMark `json:"marks"`
	// DBMB is the size of the data folder with the backlog.
	DBMB float64 `json:"db_mb"`
	// RestartReadyMS is the time from starting the server on the backlog
	// to /readyz; RestartRSSMB its memory then.
	RestartReadyMS int64   `json:"restart_ready_ms"`
	RestartRSSMB   float64 `json:"restart_rss_mb"`
	// Fetchers, FetchMax and FetchRounds are the worker setup and the
	// rounds of both fetch-rate series.
	Fetchers    int `json:"fetchers"`
	FetchMax    int `json:"fetch_max"`
	FetchRounds int `json:"fetch_rounds"`
	// ReferenceFetch is the fetch rate on the reference backlog
	// (ReferenceJobs) and Fetch the same on the full backlog, each round
	// by round from the server's restart on.
	ReferenceFetch FetchSeries `json:"reference_fetch"`
	Fetch          FetchSeries `json:"fetch"`
	// FetchRatio is Fetch.MedianPerSecond over
	// ReferenceFetch.MedianPerSecond, rounded to 3 places; 0 when a round
	// failed.
	FetchRatio float64 `json:"fetch_ratio"`
	// DrainedRSSMB and DrainedHWMMB are the server's memory after the
	// fetch-rate rounds on the full backlog.
	DrainedRSSMB float64 `json:"drained_rss_mb"`
	DrainedHWMMB float64 `json:"drained_hwm_mb"`
}

// backlogQueue is the queue the deep-backlog scenario fills.
const backlogQueue = "backlog"

// RunBacklog runs the deep-backlog scenario. It fills one queue with Jobs
// jobs, reporting the server's resident memory at 100 k, 1 M and 10 M, and
// restarts the server on the backlog, timing it. Only then does it fill
// the reference, a queue of ReferenceJobs jobs on a server and data folder
// of its own, and restart that server too, so that no other server works
// while the memory and the restart are measured. With both servers
// running it measures the fetch rate (fetchRounds) in alternating rounds,
// so that both see the same load from whatever else shares the machine,
// and compares the median rounds. Pass: resident memory never above MaxRSS
// (the backlog is not held in memory, before or after the restart), ready
// within ReadyLimit, the median fetch rate on the full backlog at least
// MinFetchRatio of the reference's, and the counts add up. A config that
// cannot be run (DrainJobs not below a backlog) is an error.
func RunBacklog(ctx context.Context, cfg BacklogConfig) (*BacklogResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	res := &BacklogResult{
		Verdict:     Verdict{Scenario: "backlog"},
		Jobs:        cfg.Jobs,
		Fetchers:    cfg.Fetchers,
		FetchMax:    cfg.FetchMax,
		FetchRounds: cfg.FetchRounds,
	}
	srv, err := newServer(cfg.Bin, filepath.Join(cfg.Dir, "data"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if err := fillFull(ctx, cfg, srv, res); err != nil {
		return nil, err
	}
	took, err := srv.Start(ctx, max(time.Minute, 2*cfg.ReadyLimit))
	if err != nil {
		return nil, fmt.Errorf("backlog: restart: %w", err)
	}
	res.RestartReadyMS = took.Milliseconds()
	if took > cfg.ReadyLimit {
		res.failf("restart with %d jobs ready after %v, more than %v", cfg.Jobs, took.Round(time.Millisecond), cfg.ReadyLimit)
	}
	m := checkMem(res, srv, cfg.MaxRSS, "after the restart")
	res.RestartRSSMB = mb(m.RSS)
	logf(cfg.Log, "backlog: restarted in %v, rss %.1f MiB", took.Round(time.Millisecond), res.RestartRSSMB)

	ref, err := startReference(ctx, cfg, res)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	fetchRounds(ctx, cfg, ref, srv, res)
	m = checkMem(res, srv, cfg.MaxRSS, "after fetching")
	res.DrainedRSSMB, res.DrainedHWMMB = mb(m.RSS), mb(m.HWM)
	for _, side := range []struct {
		name   string
		srv    *loadgen.Server
		series FetchSeries
	}{{"reference", ref, res.ReferenceFetch}, {"full backlog", srv, res.Fetch}} {
		want := side.series.Backlog - side.series.Drained
		c := client.New(side.srv.URL())
		n, err := available(ctx, c, backlogQueue)
		c.CloseIdleConnections()
		if err != nil || n != want {
			res.failf("%s: after the restart and %d acks, %d jobs available (%v), want %d", side.name, side.series.Drained, n, err, want)
		}
	}
	if err := ref.Terminate(2 * time.Minute); err != nil {
		res.failf("reference: final stop: %v", err)
	}
	if err := srv.Terminate(2 * time.Minute); err != nil {
		res.failf("final stop: %v", err)
	}
	checkFetchRatio(res, cfg)
	res.finish(began)
	return res, nil
}

// withDefaults returns cfg with its zero fields set to their defaults, or
// an error when it cannot be run.
func (cfg BacklogConfig) withDefaults() (BacklogConfig, error) {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 1_000_000
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 2
	}
	if cfg.MaxRSS <= 0 {
		cfg.MaxRSS = 300 << 20
	}
	if cfg.ReadyLimit <= 0 {
		cfg.ReadyLimit = 10 * time.Second
	}
	if cfg.ReferenceJobs <= 0 {
		cfg.ReferenceJobs = 100_000
	}
	if cfg.DrainJobs <= 0 {
		cfg.DrainJobs = 50_000
	}
	if cfg.FetchRounds <= 0 {
		cfg.FetchRounds = 5
	}
	if cfg.Fetchers <= 0 {
		cfg.Fetchers = 4
	}
	if cfg.FetchMax <= 0 {
		cfg.FetchMax = 100
	}
	if cfg.MinFetchRatio <= 0 {
		cfg.MinFetchRatio = 0.70
	}
	if cfg.DrainJobs >= cfg.Jobs || cfg.DrainJobs >= cfg.ReferenceJobs {
		return cfg, fmt.Errorf("backlog: drain %d jobs from each backlog, not less than the backlog (%d jobs) or the reference backlog (%d jobs)", cfg.DrainJobs, cfg.Jobs, cfg.ReferenceJobs)
	}
	if cfg.FetchRounds > cfg.DrainJobs {
		return cfg, fmt.Errorf("backlog: %d fetch-rate rounds, more than the %d jobs they drain", cfg.FetchRounds, cfg.DrainJobs)
	}
	if cfg.FetchMax > 1000 {
		return cfg, fmt.Errorf("backlog: fetch max %d, more than the server's limit of 1000", cfg.FetchMax)
	}
	return cfg, nil
}

// fillFull starts srv, fills its queue with cfg.Jobs jobs, recording the
// memory marks, the fill time and the database size in res, and stops it.
// A count that does not add up is a violation; a server that does not
// start or a fill that fails is an error.
func fillFull(ctx context.Context, cfg BacklogConfig, srv *loadgen.Server, res *BacklogResult) error {
	if _, err := srv.Start(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("backlog: %w", err)
	}
	c := client.New(srv.URL())
	defer c.CloseIdleConnections()
	var marks []int
	for _, m := range []int{100_000, 1_000_000, 10_000_000} {
		if m < cfg.Jobs {
			marks = append(marks, m)
		}
	}
	marks = append(marks, cfg.Jobs)
	fillBegan := time.Now()
	err := fillBacklog(ctx, cfg, c, cfg.Jobs, func(total int) {
		for len(marks) > 0 && total >= marks[0] {
			m := checkMem(res, srv, cfg.MaxRSS, fmt.Sprintf("at %d jobs", marks[0]))
			res.Marks = append(res.Marks, BacklogMark{Jobs: marks[0], RSSMB: mb(m.RSS), HWMMB: mb(m.HWM)})
			logf(cfg.Log, "backlog: %d jobs, rss %.1f MiB, peak %.1f MiB", marks[0], mb(m.RSS), mb(m.HWM))
			marks = marks[1:]
		}
	})
	res.EnqueueSeconds = seconds(time.Since(fillBegan))
	if err != nil {
		return err
	}
	if n, err := available(ctx, c, backlogQueue); err != nil || n != cfg.Jobs {
		res.failf("after filling, %d jobs available (%v), want %d", n, err, cfg.Jobs)
	}
	res.DBMB = mb(dirSize(srv.Dir))
	if err := srv.Terminate(2 * time.Minute); err != nil {
		res.failf("stop with the backlog: %v", err)
	}
	return nil
}

// startReference fills a queue with cfg.ReferenceJobs jobs on a server of
// its own (data folder Dir/reference) and restarts it, so that its ready
// windows are as cold as those of the full backlog's server. It returns
// the running server, which the caller closes. A count that does not add
// up is a violation recorded in res; a server that does not start or a
// fill that fails is an error.
func startReference(ctx context.Context, cfg BacklogConfig, res *BacklogResult) (*loadgen.Server, error) {
	srv, err := startServer(ctx, "backlog: reference", cfg.Bin, filepath.Join(cfg.Dir, "reference"))
	if err != nil {
		return nil, err
	}
	c := client.New(srv.URL())
	defer c.CloseIdleConnections()
	fillBegan := time.Now()
	if err := fillBacklog(ctx, cfg, c, cfg.ReferenceJobs, nil); err != nil {
		srv.Close()
		return nil, fmt.Errorf("backlog: reference: %w", err)
	}
	if n, err := available(ctx, c, backlogQueue); err != nil || n != cfg.ReferenceJobs {
		res.failf("reference: after filling, %d jobs available (%v), want %d", n, err, cfg.ReferenceJobs)
	}
	if err := srv.Terminate(2 * time.Minute); err != nil {
		res.failf("reference: stop with the backlog: %v", err)
	}
	took, err := srv.Start(ctx, max(time.Minute, 2*cfg.ReadyLimit))
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("backlog: reference: restart: %w", err)
	}
	logf(cfg.Log, "backlog: reference of %d jobs filled in %v, restarted in %v",
		cfg.ReferenceJobs, time.Since(fillBegan).Round(time.Millisecond), took.Round(time.Millisecond))
	return srv, nil
}

// fetchRounds measures the fetch rate (measureFetch) on the reference
// server ref and on the full backlog's server full in cfg.FetchRounds
// alternating rounds, reference first, each draining its share of
// cfg.DrainJobs from both, and records both series in res. A failed round
// is a violation and ends the rounds.
func fetchRounds(ctx context.Context, cfg BacklogConfig, ref, full *loadgen.Server, res *BacklogResult) {
	res.ReferenceFetch = FetchSeries{Backlog: cfg.ReferenceJobs}
	res.Fetch = FetchSeries{Backlog: cfg.Jobs}
	sides := []struct {
		name   string
		srv    *loadgen.Server
		series *FetchSeries
	}{
		{fmt.Sprintf("the reference backlog of %d jobs", cfg.ReferenceJobs), ref, &res.ReferenceFetch},
		{fmt.Sprintf("%d jobs", cfg.Jobs), full, &res.Fetch},
	}
	for round := range cfg.FetchRounds {
		drain := roundDrain(cfg.DrainJobs, cfg.FetchRounds, round)
		for _, side := range sides {
			s := side.series
			r, err := measureFetch(ctx, cfg, side.srv.URL(), backlogQueue, s.Backlog-s.Drained, drain)
			s.add(r)
			if err != nil {
				res.failf("fetch rate on %s, round %d of %d: %v", side.name, round+1, cfg.FetchRounds, err)
				return
			}
		}
		rr, fr := res.ReferenceFetch.Rounds[round], res.Fetch.Rounds[round]
		logf(cfg.Log, "backlog: round %d of %d, %d jobs each: reference %.0f jobs/s (first fetch %d ms), full %.0f jobs/s (first fetch %d ms)",
			round+1, cfg.FetchRounds, drain, rr.PerSecond, rr.FirstFetchMS, fr.PerSecond, fr.FirstFetchMS)
	}
}

// roundDrain is how many of drain jobs round (from 0) of rounds drains:
// an even share, the first rounds one more when rounds does not divide
// drain.
func roundDrain(drain, rounds, round int) int {
	n := drain / rounds
	if round < drain%rounds {
		n++
	}
	return n
}

// checkFetchRatio sets res.FetchRatio from the median rounds and records a
// violation when it is below cfg.MinFetchRatio. It does nothing when a
// round failed (that is a violation already).
func checkFetchRatio(res *BacklogResult, cfg BacklogConfig) {
	ref, full := res.ReferenceFetch, res.Fetch
	for _, s := range []FetchSeries{ref, full} {
		if len(s.Rounds) != cfg.FetchRounds || s.Drained != cfg.DrainJobs {
			return
		}
	}
	if ref.MedianPerSecond <= 0 {
		return
	}
	ratio := full.MedianPerSecond / ref.MedianPerSecond
	res.FetchRatio = math.Round(ratio*1000) / 1000
	logf(cfg.Log, "backlog: median fetch rate on %d jobs %.0f jobs/s (cold %.0f), on %d jobs %.0f jobs/s (cold %.0f): ratio %.3f",
		cfg.Jobs, full.MedianPerSecond, full.ColdPerSecond, cfg.ReferenceJobs, ref.MedianPerSecond, ref.ColdPerSecond, ratio)
	if ratio < cfg.MinFetchRatio {
		res.failf("median fetch rate on %d jobs %.0f jobs/s, %.3f of the %.0f jobs/s on %d jobs, below %.2f",
			cfg.Jobs, full.MedianPerSecond, ratio, ref.MedianPerSecond, cfg.ReferenceJobs, cfg.MinFetchRatio)
	}
}

// fillBacklog enqueues jobs jobs into the backlog queue in batches of
// cfg.Batch from cfg.Producers clients. After each batch it calls
// progress, when not nil, with the number of jobs enqueued so far; the
// calls never overlap.
func fillBacklog(ctx context.Context, cfg BacklogConfig, c *client.Client, jobs int, progress func(total int)) error {
	var (
		mu   sync.Mutex
		done int
	)
	batches := (jobs + cfg.Batch - 1) / cfg.Batch
	load := loadgen.Producer{Clients: cfg.Producers, Calls: int64(batches)}
	return load.Run(ctx, func(int) loadgen.Sender {
		return func(ctx context.Context, call loadgen.Call) error {
			b := int(call.Index)
			n := min(cfg.Batch, jobs-b*cfg.Batch)
			ps := make([]client.EnqueueParams, n)
			for i := range ps {
				payload := strconv.AppendInt([]byte(`{"n":`), int64(b*cfg.Batch+i), 10)
				ps[i] = client.EnqueueParams{Queue: backlogQueue, Kind: "backlog", Payload: json.RawMessage(append(payload, '}'))}
			}
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := c.EnqueueBatch(cctx, ps)
			cancel()
			if err != nil {
				return fmt.Errorf("backlog: enqueue batch %d: %w", b, err)
			}
			mu.Lock()
			defer mu.Unlock()
			done += n
			if progress != nil {
				progress(done)
			}
			return nil
		}
	})
}

// checkMem reads the server's memory and records a violation when its
// resident or peak memory is above limit.
func checkMem(res *BacklogResult, srv *loadgen.Server, limit int64, when string) loadgen.Usage {
	m, err := srv.Process().Usage()
	if err != nil {
		res.failf("%s: %v", when, err)
		return m
	}
	if m.RSS > limit || m.HWM > limit {
		res.failf("%s: rss %.1f MiB, peak %.1f MiB, limit %.1f MiB", when, mb(m.RSS), mb(m.HWM), mb(limit))
	}
	return m
}

// available is the number of available jobs of queue.
func available(ctx context.Context, c *client.Client, queue string) (int, error) {
	q, err := c.Queue(ctx, queue)
	if err != nil {
		return 0, err
	}
	return q.Counts.Available, nil
}

// dirSize is the total size of the files in dir.
func dirSize(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !info.IsDir() {
			n += info.Size()
		}
	}
	return n
}
