//go:build linux

package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/client"
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
	// FirstFetchMS is the time of the first fetch after the restart.
	FirstFetchMS int64 `json:"first_fetch_ms"`
	// Drained is how many jobs were fetched and acked after the restart;
	// DrainedRSSMB and DrainedHWMMB the server's memory after that.
	Drained      int     `json:"drained"`
	DrainedRSSMB float64 `json:"drained_rss_mb"`
	DrainedHWMMB float64 `json:"drained_hwm_mb"`
}

// RunBacklog runs the deep-backlog scenario: it fills one queue with Jobs
// jobs, reporting the server's resident memory at 100 k, 1 M and 10 M,
// restarts the server on the backlog, and fetches and acks some of it.
// Pass: resident memory never above MaxRSS (the backlog is not held in
// memory, before or after the restart), ready within ReadyLimit, and the
// counts add up.
func RunBacklog(ctx context.Context, cfg BacklogConfig) (*BacklogResult, error) {
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
	began := time.Now()
	res := &BacklogResult{Verdict: Verdict{Scenario: "backlog"}, Jobs: cfg.Jobs}
	data := filepath.Join(cfg.Dir, "data")
	srv, err := NewServer(cfg.Bin, data)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if _, err := srv.Start(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	c := client.New(srv.URL())
	const queue = "backlog"
	if err := fillBacklog(ctx, cfg, srv, c, queue, res); err != nil {
		return nil, err
	}
	if n, err := available(ctx, c, queue); err != nil || n != cfg.Jobs {
		res.failf("after filling, %d jobs available (%v), want %d", n, err, cfg.Jobs)
	}
	res.DBMB = mb(dirSize(data))

	if err := srv.Terminate(2 * time.Minute); err != nil {
		res.failf("stop with the backlog: %v", err)
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

	if err := drainSome(ctx, c, queue, res); err != nil {
		res.failf("fetch after the restart: %v", err)
	}
	m = checkMem(res, srv, cfg.MaxRSS, "after fetching")
	res.DrainedRSSMB, res.DrainedHWMMB = mb(m.RSS), mb(m.HWM)
	if n, err := available(ctx, c, queue); err != nil || n != cfg.Jobs-res.Drained {
		res.failf("after the restart and %d acks, %d jobs available (%v), want %d", res.Drained, n, err, cfg.Jobs-res.Drained)
	}
	if err := srv.Terminate(2 * time.Minute); err != nil {
		res.failf("final stop: %v", err)
	}
	res.finish(began)
	return res, nil
}

// fillBacklog enqueues cfg.Jobs jobs in batches from cfg.Producers
// goroutines, reading the server's memory at each mark.
func fillBacklog(ctx context.Context, cfg BacklogConfig, srv *Server, c *client.Client, queue string, res *BacklogResult) error {
	var marks []int
	for _, m := range []int{100_000, 1_000_000, 10_000_000} {
		if m < cfg.Jobs {
			marks = append(marks, m)
		}
	}
	marks = append(marks, cfg.Jobs)
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		firstErr   error
		wg         sync.WaitGroup
	)
	batches := (cfg.Jobs + cfg.Batch - 1) / cfg.Batch
	start := time.Now()
	for range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b := int(next.Add(1)) - 1
				if b >= batches || ctx.Err() != nil {
					return
				}
				n := min(cfg.Batch, cfg.Jobs-b*cfg.Batch)
				ps := make([]client.EnqueueParams, n)
				for i := range ps {
					payload := strconv.AppendInt([]byte(`{"n":`), int64(b*cfg.Batch+i), 10)
					ps[i] = client.EnqueueParams{Queue: queue, Kind: "backlog", Payload: json.RawMessage(append(payload, '}'))}
				}
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := c.EnqueueBatch(cctx, ps)
				cancel()
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("backlog: enqueue batch %d: %w", b, err)
					mu.Unlock()
					return
				}
				total := int(done.Add(int64(n)))
				mu.Lock()
				for len(marks) > 0 && total >= marks[0] {
					m := checkMem(res, srv, cfg.MaxRSS, fmt.Sprintf("at %d jobs", marks[0]))
					res.Marks = append(res.Marks, BacklogMark{Jobs: marks[0], RSSMB: mb(m.RSS), HWMMB: mb(m.HWM)})
					logf(cfg.Log, "backlog: %d jobs, rss %.1f MiB, peak %.1f MiB", marks[0], mb(m.RSS), mb(m.HWM))
					marks = marks[1:]
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.EnqueueSeconds = seconds(time.Since(start))
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// drainSome fetches and acks 10 batches of 1000 jobs.
func drainSome(ctx context.Context, c *client.Client, queue string, res *BacklogResult) error {
	for i := range 10 {
		began := time.Now()
		jobs, err := c.Fetch(ctx, client.FetchParams{Queues: []string{queue}, Max: 1000})
		if err != nil {
			return err
		}
		if i == 0 {
			res.FirstFetchMS = time.Since(began).Milliseconds()
		}
		if len(jobs) != 1000 {
			return fmt.Errorf("fetch %d handed out %d jobs, want 1000", i, len(jobs))
		}
		items := make([]client.AckItem, len(jobs))
		for k, j := range jobs {
			items[k] = client.AckItem{ID: j.ID, Token: j.Token()}
		}
		out, err := c.AckBatch(ctx, items)
		if err != nil {
			return err
		}
		for _, r := range out {
			if r.Err != nil {
				return fmt.Errorf("ack %s: %w", r.ID, r.Err)
			}
		}
		res.Drained += len(jobs)
	}
	return nil
}

// checkMem reads the server's memory and records a violation when its
// resident or peak memory is above limit.
func checkMem(res *BacklogResult, srv *Server, limit int64, when string) Mem {
	m, err := srv.Proc().Mem()
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
