//go:build linux

package torture

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// CrashConfig configures the kill -9 scenario. Zero values take the
// defaults.
type CrashConfig struct {
	// Bin is the spool binary. Required.
	Bin string
	// Dir is a scratch folder for the data folder and the history.
	// Required.
	Dir string
	// Cycles is how many times the server is killed. Defaults to 50.
	Cycles int
	// MinUp and MaxUp bound the time under load between a restart and the
	// next kill. Default 150ms and 600ms.
	MinUp, MaxUp time.Duration
	// Sync is the server's --sync. Defaults to "full".
	Sync string
	// ReadyLimit is the pass mark for a restart to answer /readyz.
	// Defaults to 5s.
	ReadyLimit time.Duration
	// DrainLimit bounds the final drain. Defaults to 2m.
	DrainLimit time.Duration
	// Load shapes the producers and consumers; its Seed is set from Seed.
	Load LoadConfig
	// Seed seeds the kill times and the load. Defaults to the clock.
	Seed uint64
	// Log receives progress lines; nil for none.
	Log io.Writer
}

func (c *CrashConfig) normalize() {
	if c.Cycles <= 0 {
		c.Cycles = 50
	}
	if c.MinUp <= 0 {
		c.MinUp = 150 * time.Millisecond
	}
	if c.MaxUp < c.MinUp {
		c.MaxUp = max(600*time.Millisecond, c.MinUp)
	}
	if c.Sync == "" {
		c.Sync = "full"
	}
	if c.ReadyLimit <= 0 {
		c.ReadyLimit = 5 * time.Second
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

// CrashResult is the report of the kill -9 scenario.
type CrashResult struct {
	Verdict
	// Seed replays the kill times and the load's choices (not the
	// scheduling).
	Seed uint64 `json:"seed"`
	// Sync is the durability level the server ran with.
	Sync string `json:"sync"`
	// Cycles is how many kills and restarts ran.
	Cycles int `json:"cycles"`
	// IntegrityChecks counts the integrity checks that answered ok.
	IntegrityChecks int `json:"integrity_checks_ok"`
	// ReadyMaxMS and ReadyMeanMS are the restarts' times to /readyz.
	ReadyMaxMS  int64 `json:"ready_max_ms"`
	ReadyMeanMS int64 `json:"ready_mean_ms"`
	// Summary is the checker's count over the whole history.
	Summary
	// CallErrors are the calls that ended without success after retries.
	CallErrors map[string]int `json:"call_errors,omitempty"`
	// History is the file the history was written to.
	History string `json:"history"`
	// Ordered is what the ordered queue beside the load checked: its
	// groups' runs in flight at the kills, each group finished in order.
	Ordered orderedResult `json:"ordered"`
}

// RunCrash runs the kill -9 scenario: a server under mixed load (enqueue
// single and batch, delayed jobs, fetch, ack, fail with retry, extend, a
// consumer whose leases run out) is killed with SIGKILL Cycles times. After
// each kill the database must pass integrity_check, and the restarted
// server must be ready within ReadyLimit. Then the queue is drained and
// the history checked: nothing acknowledged lost, no stale ack or double
// ack accepted, duplicates within the leases outstanding at the kills.
// An ordered queue beside it takes runs through the kills; each of its
// groups must finish in enqueue order (orderedLoad).
func RunCrash(ctx context.Context, cfg CrashConfig) (*CrashResult, error) {
	cfg.normalize()
	began := time.Now()
	res := &CrashResult{Verdict: Verdict{Scenario: "crash"}, Seed: cfg.Seed, Sync: cfg.Sync}
	data := filepath.Join(cfg.Dir, "data")
	srv, err := startServer(ctx, "crash", cfg.Bin, data, "--sync", cfg.Sync)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	h := &History{}
	c := client.New(srv.URL())
	cfg.Load.SlowConsumer = true
	load := StartLoad(c, h, cfg.Load)
	defer load.Abort()
	ordered, err := startOrdered(ctx, c, cfg.Load.Queue+"-ordered", cfg.Seed)
	if err != nil {
		return nil, err
	}
	defer ordered.stopWork()
	if err := killCycles(ctx, cfg, srv, h, res); err != nil {
		return nil, err
	}
	if res.Cycles < cfg.Cycles { // a restart failed: nothing more to learn
		res.finish(began)
		return res, nil
	}
	res.Ordered = ordered.finish(ctx, &res.Verdict, cfg.DrainLimit)

	out, err := endLoad(ctx, &res.Verdict, c, load, h, cfg.Load.Queue, cfg.DrainLimit, cfg.Dir)
	if err != nil {
		return nil, err
	}
	res.Summary, res.CallErrors, res.History = out.summary, out.callErrors, out.history
	if err := srv.Terminate(30 * time.Second); err != nil {
		res.failf("final stop: %v", err)
	}
	if err := IntegrityCheck(ctx, data); err != nil {
		res.failf("after the final stop: %v", err)
	}

	judgeCrash(res, out.final != nil)
	res.finish(began)
	return res, nil
}

// killCycles kills the server cfg.Cycles times, checking the database
// after each kill and timing each restart. It stops early, with fewer
// res.Cycles, when a restart fails.
func killCycles(ctx context.Context, cfg CrashConfig, srv *loadgen.Server, h *History, res *CrashResult) error {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	var readyTotal, readyMax time.Duration
	defer func() {
		if res.Cycles > 0 {
			res.ReadyMeanMS = (readyTotal / time.Duration(res.Cycles)).Milliseconds()
		}
		res.ReadyMaxMS = readyMax.Milliseconds()
	}()
	for cycle := 1; cycle <= cfg.Cycles; cycle++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		loadgen.Sleep(ctx, cfg.MinUp+time.Duration(rng.Int64N(int64(cfg.MaxUp-cfg.MinUp)+1)))
		h.Add(Event{Op: OpKill, Type: TypeOK})
		if err := srv.Kill(); err != nil {
			return fmt.Errorf("crash: cycle %d: %w", cycle, err)
		}
		if err := IntegrityCheck(ctx, srv.Dir); err != nil {
			res.failf("cycle %d: %v", cycle, err)
		} else {
			res.IntegrityChecks++
		}
		took, err := srv.Start(ctx, max(30*time.Second, 2*cfg.ReadyLimit))
		if err != nil {
			res.failf("cycle %d: restart: %v", cycle, err)
			return nil
		}
		h.Add(Event{Op: OpReady, Type: TypeOK})
		res.Cycles = cycle
		readyTotal += took
		readyMax = max(readyMax, took)
		if took > cfg.ReadyLimit {
			res.failf("cycle %d: ready after %v, more than %v", cycle, took.Round(time.Millisecond), cfg.ReadyLimit)
		}
		if cycle%10 == 0 {
			logf(cfg.Log, "crash: %d/%d kills, %d events", cycle, cfg.Cycles, h.Len())
		}
	}
	return nil
}

// judgeCrash records the crash scenario's missed pass marks.
func judgeCrash(res *CrashResult, listed bool) {
	judgeHistory(&res.Verdict, res.Summary, listed)
	if res.Duplicates > res.DuplicateBound {
		res.failf("duplicates %d exceed the %d leases outstanding at the kills", res.Duplicates, res.DuplicateBound)
	}
	for _, k := range sortedKeys(res.CallErrors) {
		if !allowedCrashError(k) {
			res.failf("%d calls ended with %s after their retries", res.CallErrors[k], k)
		}
	}
}

// allowedCrashError reports whether a call may end with error k in the
// crash scenario: a lease lost while the server was down is expected.
func allowedCrashError(k string) bool {
	switch k {
	case "ack:lease_lost", "fail:lease_lost", "extend:lease_lost":
		return true
	}
	return false
}

// settleLoad stops the producers, drains the queue with the consumers
// running, stops the consumers and lists the queue's final states. It
// records what went wrong in v and returns nil when the listing failed.
func settleLoad(ctx context.Context, v *Verdict, c *client.Client, load *Load, queue string, limit time.Duration) map[string]string {
	if err := load.StopProducers(settleLimit + 10*time.Second); err != nil {
		v.failf("%v", err)
	}
	if _, err := waitDrained(ctx, c, queue, limit); err != nil {
		v.failf("drain: %v", err)
	}
	if err := load.StopConsumers(settleLimit + 10*time.Second); err != nil {
		v.failf("%v", err)
	}
	final, err := listStates(ctx, c, queue)
	if err != nil {
		v.failf("final listing: %v", err)
		return nil
	}
	return final
}

// judgeHistory records in v the anomalies that no scenario allows.
func judgeHistory(v *Verdict, s Summary, listed bool) {
	check := func(n int, what string) {
		if n != 0 {
			v.failf("%s: %d", what, n)
		}
	}
	check(s.Lost, "lost (enqueue answered 2xx, never delivered)")
	check(s.StaleAcksAccepted, "stale acks accepted")
	check(s.DoubleAcks, "double acks")
	check(s.AckedRedelivered, "acked jobs delivered again")
	check(s.TokenReuse, "hand-outs reusing a token (a lease answered but not stored)")
	check(s.Unexpected, "unexpected deliveries (never enqueued)")
	check(s.RefusedButStored, "enqueues refused but stored")
	if listed {
		check(s.Missing, "acknowledged jobs missing from the final listing")
		check(s.Unfinished, "jobs not finished after the drain")
	}
	if s.UnknownRecovered != s.EnqueueUnknown {
		v.failf("unknown-outcome enqueues not recovered: %d of %d", s.EnqueueUnknown-s.UnknownRecovered, s.EnqueueUnknown)
	}
	if s.Enqueued == 0 {
		v.failf("no job was enqueued")
	}
}

// loadOutcome is what a run of the load leaves: the final states listed
// after the drain (nil when they could not be listed), the checker's
// summary of the history, the calls that failed after their retries, and
// the file the history was written to.
type loadOutcome struct {
	final      map[string]string
	summary    Summary
	callErrors map[string]int
	history    string
}

// endLoad settles load, checks its history h against the final listing
// and writes the history to history.jsonl in dir.
func endLoad(ctx context.Context, v *Verdict, c *client.Client, load *Load, h *History, queue string,
	drainLimit time.Duration, dir string) (loadOutcome, error) {
	var out loadOutcome
	out.final = settleLoad(ctx, v, c, load, queue, drainLimit)
	out.summary = Check(h.Events(), out.final)
	out.callErrors = load.CallErrors()
	out.history = filepath.Join(dir, "history.jsonl")
	if err := writeHistory(out.history, h); err != nil {
		return out, err
	}
	return out, nil
}

// writeHistory writes h to path as JSON lines.
func writeHistory(path string, h *History) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	if err := h.WriteJSONL(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}
