//go:build linux

package torture

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// Pass marks and bounds of the disk scenarios.
const (
	// answerLimit is the pass mark for any answer while the disk fails.
	answerLimit = time.Second
	// faultPhase is how long the disk stays full or read-only while
	// probes run.
	faultPhase = 3 * time.Second
	// resumeLimit bounds how long after space returns writes must succeed
	// again, without a restart.
	resumeLimit = 10 * time.Second
	// headroom is the space the full-disk scenario leaves to fill through
	// the API.
	headroom = 8 << 20
	// leaseWhileFull is the lease of fetches probed while the disk is full,
	// short so that the final drain need not wait for them.
	leaseWhileFull = 500 * time.Millisecond
)

// DiskFullConfig configures the full-disk scenario. Zero values take the
// defaults.
type DiskFullConfig struct {
	// Bin is the spool binary and Dir a scratch folder. Required.
	Bin, Dir string
	// Size is the tmpfs's size in bytes, at least 16 MiB. Defaults to 32
	// MiB.
	Size int64
	// Log receives progress lines; nil for none.
	Log io.Writer
}

// DiskFullResult is the report of the full-disk scenario.
type DiskFullResult struct {
	Verdict
	FSMB float64 `json:"fs_mb"`
	// Stored counts the jobs answered 2xx before the disk filled.
	Stored int `json:"stored_before_full"`
	// FullAnswers counts the answers to enqueues and fetches while the
	// disk was full, by status and code; FullMaxMS is the slowest.
	FullAnswers map[string]int `json:"full_answers"`
	FullMaxMS   int64          `json:"full_max_ms"`
	// ReadyWhileFull is /readyz's status while full; ReadyAfter after
	// writes resumed.
	ReadyWhileFull int `json:"readyz_while_full"`
	ReadyAfter     int `json:"readyz_after_resume"`
	// ResumeMS is the time from freeing space to the first enqueue
	// answered 2xx, with no restart.
	ResumeMS int64 `json:"resume_ms"`
	// Summary checks the whole history against the jobs listed after a
	// restart.
	Summary
}

// RunDiskFull runs the full-disk scenario: the data folder sits on a small
// tmpfs; enqueues fill it until the server answers storage_full, a ballast
// file takes the last bytes, and probes run for a while. Pass: every answer
// while full comes within a second and is 507 storage_full (or a 2xx for
// what still fit), the server stays up and /readyz says 503, writes
// succeed again without a restart once the ballast is removed, and after
// a restart every job answered 2xx is there, none refused is, and the
// database passes integrity_check.
func RunDiskFull(ctx context.Context, cfg DiskFullConfig) (*DiskFullResult, error) {
	if cfg.Size < 2*headroom {
		cfg.Size = 32 << 20
	}
	began := time.Now()
	res := &DiskFullResult{Verdict: Verdict{Scenario: "disk-full"}, FSMB: mb(cfg.Size), FullAnswers: map[string]int{}}
	fs, err := MountTmpfs(filepath.Join(cfg.Dir, "fs"), cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("disk full: %w", err)
	}
	defer fs.Close()
	data := filepath.Join(fs.Dir, "data")
	srv, err := startServer(ctx, "disk full", cfg.Bin, data)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	h := &History{}
	p := &prober{c: client.New(srv.URL()), h: h, queue: "full"}
	ballasts, err := fillDisk(ctx, fs, p, res)
	if err != nil {
		return nil, err
	}
	logf(cfg.Log, "disk full: %d jobs stored, disk full", res.Stored)
	probeFull(ctx, p, res)
	if !srv.Process().Alive() {
		return nil, fmt.Errorf("disk full: the server died: %s", srv.Process().Logs())
	}
	res.ReadyWhileFull = srv.Ready(ctx)
	if res.ReadyWhileFull != http.StatusServiceUnavailable {
		res.failf("while full: /readyz answered %d, want 503", res.ReadyWhileFull)
	}
	for _, b := range ballasts {
		if err := os.Remove(b); err != nil {
			return nil, fmt.Errorf("disk full: remove ballast: %w", err)
		}
	}
	awaitResume(ctx, p, res)
	res.ReadyAfter = srv.Ready(ctx)
	if res.ReadyAfter != http.StatusOK {
		res.failf("after space returned: /readyz answered %d, want 200", res.ReadyAfter)
	}
	logf(cfg.Log, "disk full: writes resumed after %dms", res.ResumeMS)
	verifyAfterRestart(ctx, &res.Verdict, &res.Summary, srv, p, data)
	res.finish(began)
	return res, nil
}

// fillDisk fills the file system: a ballast file takes all but headroom
// bytes, so that removing it later gives real space back; enqueues of 16
// jobs of 16 KiB fill the rest until the server answers storage_full; a
// second ballast takes what is left. It returns the ballasts' paths.
func fillDisk(ctx context.Context, fs *SmallFS, p *prober, res *DiskFullResult) ([]string, error) {
	first, err := fs.Reserve("ballast-1", headroom)
	if err != nil {
		return nil, fmt.Errorf("disk full: %w", err)
	}
	full := false
	for i := 0; i < int(headroom/(16<<10)) && !full; i++ {
		a := p.enqueue(ctx, 16, 16<<10)
		switch {
		case a.typ == TypeOK:
			res.Stored += 16
		case a.code == "storage_full":
			full = true
		default:
			res.failf("while filling: enqueue answered %s (%s)", a, a.err)
			full = true
		}
	}
	if !full {
		res.failf("no storage_full after enqueueing more than the disk holds")
	}
	second, err := fs.Fill("ballast-2")
	if err != nil {
		return nil, fmt.Errorf("disk full: %w", err)
	}
	return []string{first, second}, nil
}

// probeFull enqueues single jobs and batches and fetches for faultPhase
// while the disk is full, and checks every answer.
func probeFull(ctx context.Context, p *prober, res *DiskFullResult) {
	slow, wrong, lastWrong := 0, 0, ""
	for end := time.Now().Add(faultPhase); time.Now().Before(end); {
		for _, a := range []answer{p.enqueue(ctx, 1, 100), p.enqueue(ctx, 4, 1000), p.fetch(ctx, 5, leaseWhileFull)} {
			res.FullAnswers[a.String()]++
			res.FullMaxMS = max(res.FullMaxMS, a.took.Milliseconds())
			if a.took > answerLimit {
				slow++
			}
			if a.typ != TypeOK && a.code != "storage_full" {
				wrong, lastWrong = wrong+1, fmt.Sprintf("%s (%s)", a, a.err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if slow > 0 {
		res.failf("while full: %d answers took more than %v (slowest %dms)", slow, answerLimit, res.FullMaxMS)
	}
	if wrong > 0 {
		res.failf("while full: %d calls were answered neither 2xx nor 507 storage_full, the last %s", wrong, lastWrong)
	}
	if res.FullAnswers["507 storage_full"] == 0 {
		res.failf("while full: no call was answered 507 storage_full")
	}
}

// awaitResume enqueues until one is answered 2xx, up to resumeLimit after
// space returned, then checks that writes keep succeeding.
func awaitResume(ctx context.Context, p *prober, res *DiskFullResult) {
	freed := time.Now()
	resumed := false
	for time.Since(freed) < resumeLimit {
		if a := p.enqueue(ctx, 1, 100); a.typ == TypeOK {
			resumed = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.ResumeMS = time.Since(freed).Milliseconds()
	if !resumed {
		res.failf("writes did not resume within %v of space returning", resumeLimit)
		return
	}
	for range 10 {
		if a := p.enqueue(ctx, 4, 1000); a.typ != TypeOK {
			res.failf("after space returned: enqueue answered %s (%s)", a, a.err)
			return
		}
	}
}

// verifyAfterRestart stops the server, checks the database's integrity,
// starts the server again, drains the probe queue and checks the history
// against the final listing.
func verifyAfterRestart(ctx context.Context, v *Verdict, s *Summary, srv *loadgen.Server, p *prober, data string) {
	if err := srv.Terminate(30 * time.Second); err != nil {
		v.failf("stop: %v", err)
		_ = srv.Kill()
	}
	if err := IntegrityCheck(ctx, data); err != nil {
		v.failf("%v", err)
	}
	if _, err := srv.Start(ctx, 30*time.Second); err != nil {
		v.failf("restart: %v", err)
		return
	}
	if err := p.drain(ctx, time.Minute); err != nil {
		v.failf("%v", err)
	}
	final, err := listStates(ctx, p.c, p.queue)
	if err != nil {
		v.failf("%v", err)
	}
	*s = Check(p.h.Events(), final)
	judgeHistory(v, *s, final != nil)
	if err := srv.Terminate(30 * time.Second); err != nil {
		v.failf("final stop: %v", err)
	}
}
