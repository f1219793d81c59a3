package client_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/server"
)

// TestMain removes the test PostgreSQL, when a test started it.
func TestMain(m *testing.M) { pgtest.Main(m) }

// testTimeout bounds every test's calls, so a hang fails the test instead
// of the whole run.
const testTimeout = 20 * time.Second

// bundle is one real server on a fresh data folder and a client for it.
type bundle struct {
	t    *testing.T
	ctx  context.Context
	c    *client.Client
	base string
}

// setup starts a server on a free loopback port and returns a client for
// it, made with opts; both go away when the test ends.
func setup(t *testing.T, opts ...client.Option) *bundle {
	t.Helper()
	return setupConfig(t, nil, opts...)
}

// onPostgres has a server keep its jobs in a fresh schema of the test
// PostgreSQL.
func onPostgres(t *testing.T) func(*config.Config) {
	db := pgtest.Schema(t)
	return func(c *config.Config) { c.DB = db }
}

// setupConfig is setup with the server's configuration changed by change,
// when set.
func setupConfig(t *testing.T, change func(*config.Config), opts ...client.Option) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	if change != nil {
		change(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	srv := server.New(cfg, quietLogger())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	base := "http://" + srv.Addr()
	c := client.New(base, opts...)
	// Runs before the server stops: a connection the client dialed but
	// never used would hold up the server's graceful shutdown for 5 s.
	t.Cleanup(c.CloseIdleConnections)
	return &bundle{t: t, ctx: ctx, c: c, base: base}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// transports are the ways a Client reaches the server: the key flows run
// over each.
var transports = []struct {
	name string
	opts []client.Option
}{
	{"http", []client.Option{client.WithHTTP()}},
	{"stream", []client.Option{client.WithStream()}},
	{"default", nil},
}

// eachTransport runs test once per transport, in parallel, each with its
// own server and client.
func eachTransport(t *testing.T, test func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			test(t, setup(t, tr.opts...))
		})
	}
}

// enqueue enqueues one job and returns its id.
func (b *bundle) enqueue(p client.EnqueueParams) string {
	b.t.Helper()
	res, err := b.c.Enqueue(b.ctx, p)
	if err != nil {
		b.t.Fatalf("enqueue %+v: %v", p, err)
	}
	return res.ID
}

// get returns a job.
func (b *bundle) get(id string) *client.Job {
	b.t.Helper()
	j, err := b.c.Get(b.ctx, id)
	if err != nil {
		b.t.Fatalf("get %s: %v", id, err)
	}
	return j
}

// fetchOne leases the next job of queue, failing the test if there is none.
func (b *bundle) fetchOne(queue string) *client.Job {
	b.t.Helper()
	jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{queue}, Max: 1})
	if err != nil {
		b.t.Fatalf("fetch %s: %v", queue, err)
	}
	if len(jobs) != 1 {
		b.t.Fatalf("fetch %s: %d jobs, want 1", queue, len(jobs))
	}
	return jobs[0]
}

// waitState polls a job until it is in state, or fails the test after
// limit. Job state lives in the server, so there is no signal to wait on.
func (b *bundle) waitState(id string, state client.State, limit time.Duration) *client.Job {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j := b.get(id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("job %s is %s after %v, want %s (errors %v)", id, j.State, limit, state, j.Errors)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on ch, or fails the test after limit.
func recv[T any](t *testing.T, ch <-chan T, limit time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		t.Fatalf("timed out after %v waiting for %s", limit, what)
		var zero T
		return zero
	}
}

// metrics reads the server's /metrics: each sample's value by its series,
// as in `spool_jobs_completed_total{queue="q"}`.
func (b *bundle) metrics() map[string]float64 {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+"/metrics", nil)
	if err != nil {
		b.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("read metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		b.t.Fatalf("read metrics: %v", err)
	}
	return out
}

// waitFinished polls a queue until completed of its jobs are completed
// and dead dead, or fails the test after limit.
func (b *bundle) waitFinished(queue string, completed, dead int, limit time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		q, err := b.c.Queue(b.ctx, queue)
		if err != nil {
			b.t.Fatalf("queue %s: %v", queue, err)
		}
		if q.Counts.Completed == completed && q.Counts.Dead == dead {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("queue %s after %v: %+v, want %d completed and %d dead", queue, limit, q.Counts, completed, dead)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
