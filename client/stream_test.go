package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// startServer starts a server for cfg; the test's cleanup stops it if the
// test did not.
func startServer(t *testing.T, cfg config.Config) (srv *server.Server, stop func()) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	srv = server.New(cfg, quietLogger())
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Stop(ctx); err != nil {
				t.Errorf("stop server: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

// A stream client dials again after the server restarts: the calls in
// between fail as network errors, which a Worker rides out, and the calls
// after succeed on a new connection.
func TestStreamReconnectsAfterRestart(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	srv, stop := startServer(t, cfg)
	cfg.Addr = srv.Addr() // the restarted server listens where the first did
	base := "http://" + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	c := client.New(base, client.WithStream())
	t.Cleanup(c.CloseIdleConnections)
	w := client.NewWorker(c, client.WorkerConfig{Queues: []string{"r"}, Wait: time.Second, Logger: quietLogger()})
	handled := make(chan string, 10)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		handled <- j.ID
		return nil, nil
	})
	done := runWorker(t, w)
	before, err := c.Enqueue(ctx, client.EnqueueParams{Queue: "r", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if id := recv(t, handled, 10*time.Second, "the job before the restart"); id != before.ID {
		t.Fatalf("handled %s, want %s", id, before.ID)
	}

	stop()
	_, err = c.Enqueue(ctx, client.EnqueueParams{Queue: "r", Kind: "k"})
	var netErr *url.Error
	var apiErr *client.Error
	if !errors.As(err, &netErr) || errors.As(err, &apiErr) || !strings.HasPrefix(err.Error(), "enqueue job: Post ") {
		t.Fatalf("enqueue while the server is down: %v, want a network error", err)
	}

	startServer(t, cfg)
	after, err := c.Enqueue(ctx, client.EnqueueParams{Queue: "r", Kind: "k"})
	if err != nil {
		t.Fatalf("enqueue after the restart: %v", err)
	}
	if id := recv(t, handled, 10*time.Second, "the worker to fetch again after the restart"); id != after.ID {
		t.Fatalf("handled %s, want %s", id, after.ID)
	}
	stopWorker(t, w, done) // which waits for the acks, retried across the restart
	if j, err := c.Get(ctx, before.ID); err != nil || j.State != client.StateCompleted {
		t.Fatalf("the job handled before the restart: %+v %v", j, err)
	}
}

// Tokens work over a stream as over HTTP, and opening the stream needs one.
func TestStreamWithToken(t *testing.T) {
	t.Parallel()
	base := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	anon := client.New(base, client.WithStream())
	prod := client.New(base, client.WithStream(), client.WithToken(producerToken))
	work := client.New(base, client.WithStream(), client.WithToken(workerToken))
	for _, c := range []*client.Client{anon, prod, work} {
		t.Cleanup(c.CloseIdleConnections)
	}
	if _, err := anon.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("enqueue without a token: %v, want ErrUnauthorized", err)
	}
	if err := anon.Health(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("health over a stream without a token: %v, want ErrUnauthorized", err)
	}
	if _, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "billing", Kind: "k"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("enqueue outside the namespace: %v, want ErrForbidden", err)
	}
	res, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := work.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("enqueue with a worker token: %v, want ErrForbidden", err)
	}
	jobs, err := work.Fetch(ctx, client.FetchParams{Queues: []string{"mail.out"}})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res.ID {
		t.Fatalf("fetch with a worker token: %v %v", jobs, err)
	}
}

// The stream does not speak TLS: an https base URL fails every call with an
// error saying so, not one a Worker would retry.
func TestStreamNeedsHTTPURL(t *testing.T) {
	t.Parallel()
	c := client.New("https://127.0.0.1:1", client.WithStream())
	_, err := c.Get(context.Background(), "j")
	var netErr *url.Error
	if err == nil || errors.As(err, &netErr) || !strings.Contains(err.Error(), "http://") {
		t.Fatalf("call over https: %v", err)
	}
}

// Many goroutines share the stream through a Batcher, and a call given up
// ends its long poll on the server, so that no job is leased to nobody.
func TestStreamBatcherAndAbandonedFetch(t *testing.T) {
	t.Parallel()
	b := setup(t, client.WithStream())
	bat := client.NewBatcher(b.c, client.BatcherConfig{MaxDelay: 5 * time.Millisecond})
	const calls = 500
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bat.Enqueue(b.ctx, client.EnqueueParams{Queue: "hot", Kind: "k"}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := bat.Close(); err != nil {
		t.Fatal(err)
	}
	if q, err := b.c.Queue(b.ctx, "hot"); failed.Load() != 0 || err != nil || q.Counts.Available != calls {
		t.Fatalf("%d calls failed; queue %+v %v", failed.Load(), q, err)
	}

	ctx, cancel := context.WithTimeout(b.ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	jobs, err := b.c.Fetch(ctx, client.FetchParams{Queues: []string{"idle"}, Wait: 30 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) || len(jobs) != 0 || time.Since(began) > 5*time.Second {
		t.Fatalf("fetch given up: %v %v after %v", jobs, err, time.Since(began))
	}
	id := b.enqueue(client.EnqueueParams{Queue: "idle", Kind: "k"})
	// The abandoned poll ended on the server (or handed back the job if it
	// took it while ending), so the job is not held for its 30 s lease.
	jobs, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"idle"}, Wait: 5 * time.Second})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("fetch after the abandoned one: %v %v, want job %s", jobs, err, id)
	}
}

// Behind a proxy that drops the upgrade headers the server refuses the
// stream, and every call says so with ErrUpgradeRequired.
func TestStreamBehindProxyWithoutUpgrades(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Upgrade")
		r.Header.Del("Connection")
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c := client.New(proxy.URL, client.WithStream())
	_, err = c.Enqueue(b.ctx, client.EnqueueParams{Kind: "k"})
	var apiErr *client.Error
	if !errors.Is(err, client.ErrUpgradeRequired) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusUpgradeRequired {
		t.Fatalf("enqueue over a stream through the proxy: %v", err)
	}
}

// countingProxy is a reverse proxy in front of base that counts the
// requests it passes, upgrades included; with dropUpgrade it removes the
// upgrade headers, as a proxy that does not know them would.
func countingProxy(t *testing.T, base string, dropUpgrade bool) (proxyURL string, upgrades, plain *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	upgrades, plain = new(atomic.Int32), new(atomic.Int32)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			upgrades.Add(1)
		} else {
			plain.Add(1)
		}
		if dropUpgrade {
			r.Header.Del("Upgrade")
			r.Header.Del("Connection")
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL, upgrades, plain
}

// A Client made without a transport option carries its calls over one
// stream: twenty calls are one upgraded request. With WithHTTP they are
// twenty requests.
func TestDefaultClientUsesTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, client.WithHTTP())
	base, upgrades, plain := countingProxy(t, b.base, false)
	c := client.New(base)
	t.Cleanup(c.CloseIdleConnections)
	enqueueN(b, c, 20)
	if upgrades.Load() != 1 || plain.Load() != 0 {
		t.Fatalf("20 calls of the default client: %d upgrades, %d plain requests; want 1 and 0", upgrades.Load(), plain.Load())
	}
	h := client.New(base, client.WithHTTP())
	t.Cleanup(h.CloseIdleConnections)
	enqueueN(b, h, 20)
	if q, err := h.Queue(b.ctx, "q"); err != nil || q.Counts.Available != 40 || plain.Load() != 21 || upgrades.Load() != 1 {
		t.Fatalf("after 20 calls over HTTP: %d plain requests, %d upgrades, queue %+v %v", plain.Load(), upgrades.Load(), q, err)
	}
}

// Behind a proxy that drops the upgrade headers, the default Client falls
// back to HTTP once and for good: every call succeeds, and only the first
// tried the stream.
func TestDefaultClientFallsBackToHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, client.WithHTTP())
	base, upgrades, plain := countingProxy(t, b.base, true)
	c := client.New(base)
	t.Cleanup(c.CloseIdleConnections)
	enqueueN(b, c, 10)
	if q, err := c.Queue(b.ctx, "q"); err != nil || q.Counts.Available != 10 {
		t.Fatalf("queue %+v %v, want 10 jobs", q, err)
	}
	if upgrades.Load() != 1 || plain.Load() != 11 {
		t.Fatalf("%d upgrades and %d plain requests, want 1 and 11", upgrades.Load(), plain.Load())
	}
}

// With auth on, the default Client answers every call as HTTP would: a
// public call without a token succeeds (over HTTP, since the stream needs
// a token), a call that needs one is refused, and with a token the calls
// go over the stream.
func TestDefaultClientWithAuth(t *testing.T) {
	t.Parallel()
	base, upgrades, plain := countingProxy(t, startAuthServer(t), false)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	anon := client.New(base)
	prod := client.New(base, client.WithToken(producerToken))
	for _, c := range []*client.Client{anon, prod} {
		t.Cleanup(c.CloseIdleConnections)
	}
	if err := anon.Health(ctx); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	if _, err := anon.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("enqueue without a token: %v, want ErrUnauthorized", err)
	}
	before := plain.Load()
	for range 5 {
		if _, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "mail.out", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prod.Enqueue(ctx, client.EnqueueParams{Queue: "billing", Kind: "k"}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("enqueue outside the namespace: %v, want ErrForbidden", err)
	}
	if plain.Load() != before || upgrades.Load() != 3 {
		t.Fatalf("the token's calls: %d plain requests, %d upgrades in all; want none and 3 (two refused)",
			plain.Load()-before, upgrades.Load())
	}
}

// An https URL is not for the stream: the default Client uses HTTP there,
// and a call to nobody fails as a network error, which a Worker retries.
func TestDefaultClientOverHTTPS(t *testing.T) {
	t.Parallel()
	c := client.New("https://127.0.0.1:1")
	_, err := c.Get(context.Background(), "j")
	var netErr *url.Error
	if !errors.As(err, &netErr) {
		t.Fatalf("call over https to nobody: %v, want a network error", err)
	}
}

// enqueueN enqueues n jobs into queue "q" through c, one call each.
func enqueueN(b *bundle, c *client.Client, n int) {
	b.t.Helper()
	for range n {
		if _, err := c.Enqueue(b.ctx, client.EnqueueParams{Queue: "q", Kind: "k"}); err != nil {
			b.t.Fatalf("enqueue: %v", err)
		}
	}
}
