//go:build linux

package torture

import (
	"context"
	"io"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// GracefulConfig configures the graceful-restart scenario. Zero values
// take the defaults.
type GracefulConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// Cycles is how many SIGTERM restarts run. Defaults to 5.
	Cycles int
	// Up is the time under load before each SIGTERM. Defaults to 1s.
	Up time.Duration
	// StopLimit is the pass mark for the server to exit after SIGTERM.
	// Defaults to 10s.
	StopLimit time.Duration
	// DrainLimit bounds the final drain. Defaults to 2m.
	DrainLimit time.Duration
	// Load shapes the producers and consumers.
	Load LoadConfig
	// Seed seeds the load. Defaults to the clock.
	Seed uint64
	// Log receives progress lines; nil for none.
	Log io.Writer
}

func (c *GracefulConfig) normalize() {
	if c.Cycles <= 0 {
		c.Cycles = 5
	}
	if c.Up <= 0 {
		c.Up = time.Second
	}
	if c.StopLimit <= 0 {
		c.StopLimit = 10 * time.Second
	}
	if c.DrainLimit <= 0 {
		c.DrainLimit = 2 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	c.Load.Seed = c.Seed
	c.Load.normalize()
}

// GracefulResult is the report of the graceful-restart scenario.
type GracefulResult struct {
	Verdict
	Seed   uint64 `json:"seed"`
	Cycles int    `json:"cycles"`
	// StopMaxMS is the longest time from SIGTERM to exit; ReadyMaxMS the
	// longest restart to /readyz.
	StopMaxMS  int64 `json:"stop_max_ms"`
	ReadyMaxMS int64 `json:"ready_max_ms"`
	Summary
	// CallErrors are the calls that ended without success after retries;
	// the pass mark is none.
	CallErrors map[string]int `json:"call_errors,omitempty"`
	History    string         `json:"history"`
}

// RunGraceful runs the graceful-restart scenario: a server under mixed
// load gets SIGTERM Cycles times and is started again each time. Clients
// retry as docs/protocol.md says (same job ids, same lease tokens). Pass:
// every stop exits 0 within StopLimit, the database passes
// integrity_check, nothing is lost, and no call ends in an error after its
// retries.
func RunGraceful(ctx context.Context, cfg GracefulConfig) (*GracefulResult, error) {
	cfg.normalize()
	began := time.Now()
	res := &GracefulResult{Verdict: Verdict{Scenario: "graceful"}, Seed: cfg.Seed}
	data := filepath.Join(cfg.Dir, "data")
	srv, err := startServer(ctx, "graceful", cfg.Bin, data)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	h := &History{}
	c := client.New(srv.URL())
	load := StartLoad(c, h, cfg.Load)
	defer load.Abort()

	var stopMax, readyMax time.Duration
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		loadgen.Sleep(ctx, cfg.Up)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		stopped := time.Now()
		if err := srv.Terminate(cfg.StopLimit); err != nil {
			res.failf("cycle %d: %v", cycle, err)
		}
		stopMax = max(stopMax, time.Since(stopped))
		if err := IntegrityCheck(ctx, data); err != nil {
			res.failf("cycle %d: %v", cycle, err)
		}
		took, err := srv.Start(ctx, 30*time.Second)
		if err != nil {
			res.failf("cycle %d: restart: %v", cycle, err)
			load.Abort()
			res.finish(began)
			return res, nil
		}
		readyMax = max(readyMax, took)
		res.Cycles = cycle
		logf(cfg.Log, "graceful: %d/%d restarts, %d events", cycle, cfg.Cycles, h.Len())
	}
	res.StopMaxMS, res.ReadyMaxMS = stopMax.Milliseconds(), readyMax.Milliseconds()

	out, err := endLoad(ctx, &res.Verdict, c, load, h, cfg.Load.Queue, cfg.DrainLimit, cfg.Dir)
	if err != nil {
		return nil, err
	}
	res.Summary, res.CallErrors, res.History = out.summary, out.callErrors, out.history
	if err := srv.Terminate(cfg.StopLimit); err != nil {
		res.failf("final stop: %v", err)
	}
	judgeHistory(&res.Verdict, res.Summary, out.final != nil)
	for _, k := range sortedKeys(res.CallErrors) {
		res.failf("%d calls ended with %s after their retries", res.CallErrors[k], k)
	}
	res.finish(began)
	return res, nil
}
