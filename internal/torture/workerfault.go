//go:build linux

package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// rescueSlack is the protocol's bound on how long after its lease runs out
// a job is handed out again.
const rescueSlack = time.Second

// WorkerFaultConfig configures the killed-worker and stopped-worker
// scenario. Zero values take the defaults.
type WorkerFaultConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// WorkerBin runs the worker processes, as `WorkerBin worker --server
	// URL …`: spool-torture, whose worker command is RunWorker. Required.
	WorkerBin string
	// Lease is the workers' lease. Defaults to 1s.
	Lease time.Duration
	// Log receives progress lines; nil for none.
	Log io.Writer
}

// WorkerFaultResult is the report of the killed-worker and stopped-worker
// scenario.
type WorkerFaultResult struct {
	Verdict
	LeaseMS int64 `json:"lease_ms"`
	// KillHeartbeatMS is how far past the first lease the killed worker's
	// heartbeats had moved its lease's expiry.
	KillHeartbeatMS int64 `json:"kill_heartbeat_ms"`
	// KillRedeliveryMS is when the killed worker's job was handed out
	// again, counted from its last lease expiry (pass: at most 1000).
	KillRedeliveryMS int64 `json:"kill_redelivery_ms"`
	// KillAttempts are the job's attempt numbers at the two hand-outs.
	KillAttempts [2]int `json:"kill_attempts"`
	// StopRedeliveryMS is the same figure for the stopped worker's job.
	StopRedeliveryMS int64 `json:"stop_redelivery_ms"`
	// StopLateAnswers are the answers to the stopped worker's extend, ack
	// and fail after SIGCONT: first while the second worker held the job,
	// then after it acked.
	StopLateAnswers []string `json:"stop_late_answers"`
	// StopFinal is the job's state and result at the end.
	StopFinal string `json:"stop_final"`
}

// RunWorkerFault runs the worker scenarios. A worker process (the Go
// client's Worker, heartbeating) is killed with SIGKILL mid-job: its job
// must be handed out again within lease + 1 s of its last heartbeat, with
// attempt + 1. Another worker is stopped with SIGSTOP past its lease while
// a second worker takes its job; after SIGCONT its extend, ack and fail
// must all get 409 lease_lost, and the job must keep the second worker's
// result.
func RunWorkerFault(ctx context.Context, cfg WorkerFaultConfig) (*WorkerFaultResult, error) {
	if cfg.Lease <= 0 {
		cfg.Lease = time.Second
	}
	began := time.Now()
	res := &WorkerFaultResult{Verdict: Verdict{Scenario: "worker-fault"}, LeaseMS: cfg.Lease.Milliseconds()}
	srv, err := startServer(ctx, "worker fault", cfg.Bin, filepath.Join(cfg.Dir, "data"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	c := client.New(srv.URL())
	if err := killWorker(ctx, cfg, srv, c, res); err != nil {
		res.failf("killed worker: %v", err)
	}
	logf(cfg.Log, "worker fault: killed worker done")
	if err := stopWorker(ctx, cfg, srv, c, res); err != nil {
		res.failf("stopped worker: %v", err)
	}
	if err := srv.Terminate(30 * time.Second); err != nil {
		res.failf("final stop: %v", err)
	}
	res.finish(began)
	return res, nil
}

func killWorker(ctx context.Context, cfg WorkerFaultConfig, srv *loadgen.Server, c *client.Client, res *WorkerFaultResult) error {
	const queue, id = "worker-kill", "worker-kill-1"
	w, first, err := startOnJob(ctx, cfg, srv, c, queue, id, "hang", ModeHang)
	if err != nil {
		return err
	}
	defer w.Close()
	// Let a few heartbeats pass, then kill the worker mid-job.
	loadgen.Sleep(ctx, cfg.Lease*3/2)
	if err := w.Kill(); err != nil {
		return err
	}
	// A heartbeat sent just before the kill may still be in flight.
	loadgen.Sleep(ctx, 100*time.Millisecond)
	j, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	if j.State != client.StateActive || j.Lease == nil {
		return fmt.Errorf("job after the kill is %s, want active with a lease", j.State)
	}
	expiry := j.Lease.ExpiresAt
	res.KillHeartbeatMS = expiry.Sub(j.StartedAt.Add(cfg.Lease)).Milliseconds()
	if res.KillHeartbeatMS <= 0 {
		res.failf("killed worker: no heartbeat extended the lease (expiry %v, started %v)", expiry, j.StartedAt)
	}
	again, at, err := fetchOne(ctx, c, queue, expiry.Add(10*time.Second))
	if err != nil {
		return err
	}
	res.KillRedeliveryMS = at.Sub(expiry).Milliseconds()
	res.KillAttempts = [2]int{first.Attempt, again.Attempt}
	if at.Sub(expiry) > rescueSlack {
		res.failf("killed worker: job handed out again %v after its last lease expiry, more than %v", at.Sub(expiry).Round(time.Millisecond), rescueSlack)
	}
	if again.Attempt != first.Attempt+1 || again.Token() <= first.Token {
		res.failf("killed worker: second hand-out has attempt %d token %d after attempt %d token %d", again.Attempt, again.Token(), first.Attempt, first.Token)
	}
	_, err = c.Ack(ctx, id, again.Token(), nil)
	return err
}

func stopWorker(ctx context.Context, cfg WorkerFaultConfig, srv *loadgen.Server, c *client.Client, res *WorkerFaultResult) error {
	const queue, id = "worker-stop", "worker-stop-1"
	w, first, err := startOnJob(ctx, cfg, srv, c, queue, id, "stall", ModeStall)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	j, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	if j.Lease == nil {
		return fmt.Errorf("job is %s, want active", j.State)
	}
	expiry := j.Lease.ExpiresAt
	second, at, err := fetchOne(ctx, c, queue, expiry.Add(10*time.Second))
	if err != nil {
		_ = w.Signal(syscall.SIGCONT)
		return err
	}
	res.StopRedeliveryMS = at.Sub(expiry).Milliseconds()
	if at.Sub(expiry) > rescueSlack {
		res.failf("stopped worker: job handed out again %v after its lease expiry, more than %v", at.Sub(expiry).Round(time.Millisecond), rescueSlack)
	}
	if second.Attempt != first.Attempt+1 || second.Token() <= first.Token {
		res.failf("stopped worker: second hand-out has attempt %d token %d after attempt %d token %d", second.Attempt, second.Token(), first.Attempt, first.Token)
	}
	if err := w.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	// Late calls while the second worker holds the job, then after it
	// acked it.
	if err := lateRound(w, res, "while held"); err != nil {
		return err
	}
	if _, err := c.Ack(ctx, id, second.Token(), map[string]string{"by": "second-worker"}); err != nil {
		return fmt.Errorf("second worker's ack: %w", err)
	}
	if err := lateRound(w, res, "after ack"); err != nil {
		return err
	}
	final, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	var result struct{ By string }
	_ = json.Unmarshal(final.Result, &result)
	res.StopFinal = fmt.Sprintf("%s attempt %d result %s", final.State, final.Attempt, final.Result)
	if final.State != client.StateCompleted || result.By != "second-worker" || final.Attempt != second.Attempt {
		res.failf("stopped worker: job ended %s, want completed with the second worker's result", res.StopFinal)
	}
	return nil
}

// lateRound makes the stalled worker send its stale extend, ack and fail,
// and checks that each got 409 lease_lost.
func lateRound(w *WorkerProc, res *WorkerFaultResult, when string) error {
	if err := w.Send("go"); err != nil {
		return err
	}
	for range 3 {
		e, err := w.next(10*time.Second, func(e WorkerEvent) bool { return e.Event == "late" })
		if err != nil {
			return err
		}
		answer := fmt.Sprintf("%s %s: %d %s", when, e.Op, e.Status, e.Code)
		res.StopLateAnswers = append(res.StopLateAnswers, answer)
		if e.Status != 409 || e.Code != "lease_lost" {
			res.failf("stopped worker: late %s, want 409 lease_lost", answer)
		}
	}
	return nil
}

// fetchOne long-polls queue until it hands out a job or deadline passes,
// and returns the job and when it arrived.
func fetchOne(ctx context.Context, c *client.Client, queue string, deadline time.Time) (*client.Job, time.Time, error) {
	for time.Now().Before(deadline) {
		wait := min(time.Until(deadline), 10*time.Second)
		if wait < 100*time.Millisecond {
			wait = 100 * time.Millisecond
		}
		cctx, cancel := context.WithTimeout(ctx, wait+callTimeout)
		jobs, err := c.Fetch(cctx, client.FetchParams{Queues: []string{queue}, Max: 1, Wait: wait, Worker: "torture-second"})
		cancel()
		at := time.Now()
		if err != nil {
			return nil, at, fmt.Errorf("fetch from %s: %w", queue, err)
		}
		if len(jobs) > 0 {
			return jobs[0], at, nil
		}
	}
	return nil, time.Now(), fmt.Errorf("no job handed out from %s in time", queue)
}

// startOnJob enqueues job id of kind on queue, starts a worker process in
// mode on the queue, and waits for it to start the job; it returns the
// worker, which the caller closes, and its "started" event.
func startOnJob(ctx context.Context, cfg WorkerFaultConfig, srv *loadgen.Server, c *client.Client, queue, id, kind, mode string) (*WorkerProc, WorkerEvent, error) {
	if _, err := c.Enqueue(ctx, client.EnqueueParams{ID: id, Queue: queue, Kind: kind, MaxAttempts: 5, Lease: cfg.Lease}); err != nil {
		return nil, WorkerEvent{}, err
	}
	w, err := StartWorker(cfg.WorkerBin, srv.URL(), "--mode", mode, "--queue", queue, "--lease", cfg.Lease.String())
	if err != nil {
		return nil, WorkerEvent{}, err
	}
	first, err := w.next(10*time.Second, func(e WorkerEvent) bool { return e.Event == "started" && e.Job == id })
	if err != nil {
		w.Close()
		return nil, WorkerEvent{}, err
	}
	return w, first, nil
}
