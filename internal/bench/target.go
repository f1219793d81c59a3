package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/loadgen"
)

// target is the server under load: an embedded child process, or a
// running server given by URL (with its process id when known).
type target struct {
	url   string
	pid   int // 0 when unknown
	child *embedded
	db    string // the embedded server's PostgreSQL URL, if any
}

// openTarget starts the embedded server, or checks that the given one is
// ready (and that its pid can be read).
func openTarget(ctx context.Context, o Options) (*target, error) {
	if o.Server == "" {
		extra := []string{"--sync", o.Sync}
		if o.DB != "" {
			extra = append(extra, "--db", o.DB)
		}
		c, err := startEmbedded(ctx, o.ServerCommand, extra)
		if err != nil {
			return nil, err
		}
		return &target{url: c.url(), pid: c.pid(), child: c, db: o.DB}, nil
	}
	t := &target{url: o.Server, pid: o.ServerPID}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, t.url+"/readyz", nil)
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", t.url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server %s is not reachable: %w", t.url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("server %s is not ready: /readyz answered %s", t.url, resp.Status)
	}
	if t.pid != 0 {
		if _, err := loadgen.ReadUsage(t.pid); err != nil {
			return nil, fmt.Errorf("server pid %d: %w", t.pid, err)
		}
	}
	return t, nil
}

// describe names the target for reports.
func (t *target) describe() string {
	switch {
	case t.child != nil && t.db != "":
		return "embedded on PostgreSQL"
	case t.child != nil:
		return "embedded"
	}
	return t.url
}

// usage reads the server process's CPU time and memory, when its pid is
// known and readable.
func (t *target) usage() (loadgen.Usage, bool) {
	if t.pid == 0 {
		return loadgen.Usage{}, false
	}
	u, err := loadgen.ReadUsage(t.pid)
	return u, err == nil
}

// close stops the embedded server and records in res anything it logged
// and whether it died during the run.
func (t *target) close(res *Result) error {
	if t.child == nil {
		return nil
	}
	died := !t.child.running()
	err := t.child.stop()
	res.ServerLog = t.child.notableLogs()
	if died {
		res.addError(fmt.Sprintf("the embedded server exited during the run (%s): %s",
			t.child.exitStatus(), strings.Join(res.ServerLog, " | ")))
	}
	return err
}
