//go:build linux

package torture

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// PoisonConfig configures the poison-job scenario. Zero values take the
// defaults.
type PoisonConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// WorkerBin runs the worker processes, as `WorkerBin worker --server
	// URL …`: spool-torture, whose worker command is RunWorker. Required.
	WorkerBin string
	// MaxAttempts of the poison job. Defaults to 3.
	MaxAttempts int
	// Lease of every job. Defaults to 1s.
	Lease time.Duration
	// Concurrency of the worker process. Defaults to 4.
	Concurrency int
	// Interval between the enqueues of ordinary jobs. Defaults to 20ms.
	Interval time.Duration
	// Limit bounds the whole run. Defaults to 2m.
	Limit time.Duration
	// Log receives progress lines; nil for none.
	Log io.Writer
}

// PoisonResult is the report of the poison-job scenario.
type PoisonResult struct {
	Verdict
	MaxAttempts int `json:"max_attempts"`
	// PoisonDeliveries counts the hand-outs of the poison job the workers
	// reported; WorkerCrashes the worker processes that died.
	PoisonDeliveries int `json:"poison_deliveries"`
	WorkerCrashes    int `json:"worker_crashes"`
	// PoisonFinal is the poison job's final state and attempt.
	PoisonFinal string `json:"poison_final"`
	// OKEnqueued and OKCompleted count the ordinary jobs.
	OKEnqueued  int `json:"ok_enqueued"`
	OKCompleted int `json:"ok_completed"`
	// OKBetweenPoison is the fewest ordinary jobs completed between two
	// hand-outs of the poison job.
	OKBetweenPoison int `json:"ok_between_poison"`
}

// RunPoison runs the poison-job scenario: a job whose handler kills its
// worker process on every attempt, in a queue where ordinary jobs keep
// arriving and a supervisor restarts the worker whenever it dies. Pass:
// the poison job is dead after exactly MaxAttempts hand-outs, and ordinary
// jobs complete between those hand-outs and after.
func RunPoison(ctx context.Context, cfg PoisonConfig) (*PoisonResult, error) {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 2 * time.Minute
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Limit)
	defer cancel()
	res := &PoisonResult{Verdict: Verdict{Scenario: "poison"}, MaxAttempts: cfg.MaxAttempts}
	srv, err := startServer(ctx, "poison", cfg.Bin, filepath.Join(cfg.Dir, "data"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	c := client.New(srv.URL())
	const queue, poisonID = "poison", "poison-1"
	if _, err := c.Enqueue(ctx, client.EnqueueParams{ID: poisonID, Queue: queue, Kind: "poison", MaxAttempts: cfg.MaxAttempts, Lease: cfg.Lease}); err != nil {
		return nil, fmt.Errorf("poison: %w", err)
	}

	// Ordinary jobs arrive until the poison job is dead.
	stopOK := make(chan struct{})
	var okDone sync.WaitGroup
	okDone.Add(1)
	go func() {
		defer okDone.Done()
		ordinary := loadgen.Producer{Pace: cfg.Interval, Stop: stopOK}
		_ = ordinary.Run(ctx, func(int) loadgen.Sender {
			return func(ctx context.Context, call loadgen.Call) error {
				n := int(call.Index)
				_, err := c.Enqueue(ctx, client.EnqueueParams{ID: fmt.Sprintf("ok-%d", n), Queue: queue, Kind: "ok", Lease: cfg.Lease})
				if err == nil {
					res.OKEnqueued = n + 1
				}
				return nil
			}
		})
	}()
	poisonAt, live, err := supervise(ctx, cfg, srv, c, res, queue, poisonID)
	close(stopOK)
	okDone.Wait()
	if err != nil {
		return nil, err
	}
	defer live.Close()
	// The last worker, alive since the poison job died, finishes the
	// ordinary jobs.
	if _, err := waitDrained(ctx, c, queue, time.Minute); err != nil {
		res.failf("ordinary jobs: %v", err)
	}
	_ = live.Signal(syscall.SIGTERM)
	_ = live.Wait(30 * time.Second)
	if err := judgePoison(ctx, c, res, queue, poisonID, poisonAt); err != nil {
		return nil, err
	}
	if err := srv.Terminate(30 * time.Second); err != nil {
		res.failf("final stop: %v", err)
	}
	res.finish(began)
	return res, nil
}

// supervise runs worker processes one after the other, starting a new one
// whenever the last one dies, until the poison job is dead. It returns the
// times the poison job was handed out and the worker still running.
func supervise(ctx context.Context, cfg PoisonConfig, srv *loadgen.Server, c *client.Client, res *PoisonResult, queue, poisonID string) ([]time.Time, *WorkerProc, error) {
	var poisonAt []time.Time
	isDead := func() bool {
		j, err := c.Get(ctx, poisonID)
		return err == nil && j.State == client.StateDead
	}
	for {
		w, err := StartWorker(cfg.WorkerBin, srv.URL(), "--mode", ModePoison, "--queue", queue,
			"--lease", cfg.Lease.String(), "--concurrency", fmt.Sprint(cfg.Concurrency))
		if err != nil {
			return nil, nil, err
		}
		check := time.NewTicker(100 * time.Millisecond)
		exited := false
		for !exited {
			select {
			case e, ok := <-w.Events:
				if !ok {
					exited = true
				} else if e.Event == "started" && e.Job == poisonID {
					poisonAt = append(poisonAt, e.At)
					logf(cfg.Log, "poison: hand-out %d (attempt %d)", len(poisonAt), e.Attempt)
				}
			case <-check.C:
				if isDead() {
					check.Stop()
					go func() {
						for range w.Events { // keep the worker's output flowing
						}
					}()
					return poisonAt, w, nil
				}
			case <-ctx.Done():
				check.Stop()
				w.Close()
				res.failf("poison job not dead within %v", cfg.Limit)
				return nil, nil, fmt.Errorf("poison: job not dead within %v", cfg.Limit)
			}
		}
		check.Stop()
		<-w.Exited()
		res.WorkerCrashes++
	}
}

// judgePoison checks the poison job's end and the ordinary jobs' flow.
func judgePoison(ctx context.Context, c *client.Client, res *PoisonResult, queue, poisonID string, poisonAt []time.Time) error {
	res.PoisonDeliveries = len(poisonAt)
	if res.PoisonDeliveries != res.MaxAttempts {
		res.failf("poison job handed out %d times, want exactly max_attempts = %d", res.PoisonDeliveries, res.MaxAttempts)
	}
	if res.WorkerCrashes != res.MaxAttempts {
		res.failf("%d worker processes died, want one per hand-out of the poison job (%d)", res.WorkerCrashes, res.MaxAttempts)
	}
	var finished []time.Time
	for j, err := range c.ListAll(ctx, client.ListParams{Queue: queue, Limit: 1000}) {
		if err != nil {
			return fmt.Errorf("poison: list jobs: %w", err)
		}
		if j.ID == poisonID {
			res.PoisonFinal = fmt.Sprintf("%s attempt %d errors %d", j.State, j.Attempt, len(j.Errors))
			if j.State != client.StateDead || j.Attempt != res.MaxAttempts {
				res.failf("poison job ended %s, want dead at attempt %d", res.PoisonFinal, res.MaxAttempts)
			}
			continue
		}
		if j.State == client.StateCompleted {
			res.OKCompleted++
			finished = append(finished, j.FinishedAt)
		}
	}
	if res.OKCompleted != res.OKEnqueued || res.OKEnqueued == 0 {
		res.failf("ordinary jobs: %d of %d completed", res.OKCompleted, res.OKEnqueued)
	}
	res.OKBetweenPoison = -1
	for i := 1; i < len(poisonAt); i++ {
		n := 0
		for _, f := range finished {
			if f.After(poisonAt[i-1]) && f.Before(poisonAt[i]) {
				n++
			}
		}
		if res.OKBetweenPoison < 0 || n < res.OKBetweenPoison {
			res.OKBetweenPoison = n
		}
	}
	if res.OKBetweenPoison == 0 {
		res.failf("no ordinary job completed between two hand-outs of the poison job")
	}
	return nil
}
