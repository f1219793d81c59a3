//go:build linux

package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// ReadOnlyConfig configures the read-only-disk scenario. Zero values take
// the defaults.
type ReadOnlyConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// Size is the ext4 image's size in bytes. Defaults to 64 MiB.
	Size int64
	// Producers is how many probes enqueue at once. Defaults to 4.
	Producers int
	// Log receives progress lines; nil for none.
	Log io.Writer
}

// ReadOnlyResult is the report of the read-only-disk scenario.
type ReadOnlyResult struct {
	Verdict
	FSMB float64 `json:"fs_mb"`
	// Before counts the answers to enqueues sent before the file system
	// failed, FaultAnswers those sent after, by status and code;
	// FaultMaxMS is the slowest of the latter.
	Before       map[string]int `json:"answers_before"`
	FaultAnswers map[string]int `json:"answers_while_read_only"`
	FaultMaxMS   int64          `json:"fault_max_ms"`
	// ReadyWhileRO is /readyz's status while read-only.
	ReadyWhileRO int `json:"readyz_while_read_only"`
	// StopStatus is how the server ended after SIGTERM while read-only.
	StopStatus string `json:"stop_status"`
	// Summary checks the history against the jobs listed after the file
	// system was repaired and the server restarted.
	Summary
}

// RunReadOnly runs the read-only-disk scenario: the data folder sits on an
// ext4 image mounted with errors=remount-ro; between two of the producers'
// enqueues, ext4 is made to fail, which turns it read-only under the open
// database, as a failing disk does. Pass: every enqueue sent afterwards is answered 503
// unavailable (or 507) within a second, the server stays up and /readyz
// says 503, it stops on SIGTERM, and once the file system is checked and
// mounted again a restarted server holds every job answered 2xx (a commit
// whose write or fsync failed was never acknowledged), none refused, and
// passes integrity_check.
func RunReadOnly(ctx context.Context, cfg ReadOnlyConfig) (*ReadOnlyResult, error) {
	if cfg.Size <= 0 {
		cfg.Size = 64 << 20
	}
	if cfg.Producers <= 0 {
		cfg.Producers = 4
	}
	began := time.Now()
	res := &ReadOnlyResult{
		Verdict: Verdict{Scenario: "read-only"}, FSMB: mb(cfg.Size),
		Before: map[string]int{}, FaultAnswers: map[string]int{},
	}
	fs, err := MountExt4(filepath.Join(cfg.Dir, "fs"), filepath.Join(cfg.Dir, "fs.img"), cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("read-only: %w", err)
	}
	defer fs.Close()
	data := filepath.Join(fs.Dir, "data")
	srv, err := startServer(ctx, "read-only", cfg.Bin, data)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	h := &History{}
	c := client.New(srv.URL())
	probes := &roProbes{res: res, stop: make(chan struct{})}
	probes.start(ctx, c, h, cfg.Producers)
	loadgen.Sleep(ctx, 500*time.Millisecond)
	if err := probes.failBetweenCalls(fs); err != nil {
		probes.halt()
		return nil, fmt.Errorf("read-only: %w", err)
	}
	logf(cfg.Log, "read-only: file system failed under load")
	loadgen.Sleep(ctx, faultPhase)
	res.ReadyWhileRO = srv.Ready(ctx)
	probes.halt()
	probes.judge()
	if res.ReadyWhileRO != http.StatusServiceUnavailable {
		res.failf("while read-only: /readyz answered %d, want 503", res.ReadyWhileRO)
	}
	if !srv.Process().Alive() {
		res.failf("the server died while read-only: %v: %s", srv.Process().ExitErr(), srv.Process().Logs())
	}

	// The operator's part: stop the server, check the file system and
	// mount it again.
	res.StopStatus = "exited 0"
	if err := srv.Terminate(30 * time.Second); err != nil {
		res.StopStatus = err.Error()
		if errors.Is(err, loadgen.ErrStopTimeout) {
			res.failf("stop while read-only: %v", err)
		}
	}
	if err := fs.Repair(); err != nil {
		return nil, fmt.Errorf("read-only: %w", err)
	}
	p := &prober{c: c, h: h, queue: "ro", prefix: "after"}
	verifyAfterRestart(ctx, &res.Verdict, &res.Summary, srv, p, data)
	res.finish(began)
	return res, nil
}

// roProbes are the producers of the read-only scenario and what they saw.
type roProbes struct {
	res  *ReadOnlyResult
	stop chan struct{}
	wg   sync.WaitGroup
	// pause is held shared by each probe while its call is in flight and
	// taken whole to fail the file system between calls.
	pause sync.RWMutex

	mu       sync.Mutex
	failedAt time.Time // zero until the file system failed
	// slow and wrong count the answers past answerLimit and those other
	// than 503/507 once the file system failed.
	slow, wrong int
	lastWrong   string
}

// start runs n producers enqueueing batches of 1 to 4 jobs.
func (r *roProbes) start(ctx context.Context, c *client.Client, h *History, n int) {
	producers := loadgen.Producer{Clients: n, Pace: 5 * time.Millisecond, Stop: r.stop}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = producers.Run(ctx, func(i int) loadgen.Sender {
			p := &prober{c: c, h: h, queue: "ro", prefix: fmt.Sprintf("ro%d", i)}
			return func(ctx context.Context, _ loadgen.Call) error {
				r.pause.RLock()
				sent := time.Now()
				a := p.enqueue(ctx, 1+i%4, 1000)
				r.pause.RUnlock()
				r.record(sent, a)
				return nil
			}
		})
	}()
}

// record counts one answer, as before or after the failure by when it
// was sent.
func (r *roProbes) record(sent time.Time, a answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failedAt.IsZero() || sent.Before(r.failedAt) {
		r.res.Before[a.String()]++
		return
	}
	r.res.FaultAnswers[a.String()]++
	r.res.FaultMaxMS = max(r.res.FaultMaxMS, a.took.Milliseconds())
	if a.took > answerLimit {
		r.slow++
	}
	if a.typ == TypeOK || (a.code != "unavailable" && a.code != "storage_full") {
		r.wrong, r.lastWrong = r.wrong+1, fmt.Sprintf("%s (%s)", a, a.err)
	}
}

// failBetweenCalls turns fs read-only while no call is in flight. On Linux
// ext4, an fsync that races the switch to read-only can report success for
// data that is then lost (see docs/reliability.md), which no program can
// detect, so the failure strikes between commits.
func (r *roProbes) failBetweenCalls(fs *SmallFS) error {
	r.pause.Lock()
	defer r.pause.Unlock()
	err := fs.FailReadOnly()
	if err == nil {
		err = fs.waitReadOnly(2 * time.Second)
	}
	r.mu.Lock()
	r.failedAt = time.Now()
	r.mu.Unlock()
	return err
}

// halt stops the producers and waits for them.
func (r *roProbes) halt() {
	close(r.stop)
	r.wg.Wait()
}

// judge records the missed pass marks of the answers after the failure.
func (r *roProbes) judge() {
	if len(r.res.FaultAnswers) == 0 {
		r.res.failf("no enqueue was answered while read-only")
	}
	if r.slow > 0 {
		r.res.failf("while read-only: %d answers took more than %v (slowest %dms)", r.slow, answerLimit, r.res.FaultMaxMS)
	}
	if r.wrong > 0 {
		r.res.failf("while read-only: %d enqueues were not answered 503 unavailable or 507 storage_full, the last %s", r.wrong, r.lastWrong)
	}
}
