package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/config"
)

// TestWorkerCallsPerJob guards, without timing anything, what a Worker
// with 100 handlers costs the server per job on each store: the requests
// it makes (fetches, acks, fails, heartbeats) and the commits they take,
// read from the server's metrics. A worker that acked or failed one job
// per call would make at least one request and, on PostgreSQL, one commit
// per job.
func TestWorkerCallsPerJob(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name   string
		change func(t *testing.T) func(*config.Config)
		// commits is the series counting the store's commits.
		commits string
	}{
		{"sqlite", func(*testing.T) func(*config.Config) { return nil }, `spool_store_commit_seconds_count{store="disk"}`},
		{"postgres", onPostgres, `spool_store_commit_seconds_count{store="postgres"}`},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			b := setupConfig(t, st.change(t))
			const n, concurrency = 1000, 100
			// A tenth of the jobs fail, for good.
			ps := make([]client.EnqueueParams, n)
			for i := range ps {
				ps[i] = client.EnqueueParams{Queue: "calls", Kind: "noop"}
				if i%10 == 0 {
					ps[i].Kind = "bad"
				}
			}
			if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
				t.Fatal(err)
			}
			before := b.metrics()

			w := b.worker(client.WorkerConfig{Queues: []string{"calls"}, Concurrency: concurrency})
			var handled atomic.Int32
			all := make(chan struct{})
			count := func() {
				if handled.Add(1) == n {
					close(all)
				}
			}
			w.Handle("noop", func(context.Context, *client.Job) (any, error) {
				count()
				return nil, nil
			})
			w.Handle("bad", func(context.Context, *client.Job) (any, error) {
				count()
				return nil, client.NoRetry(errors.New("bad job"))
			})
			done := runWorker(t, w)
			recv(t, all, 30*time.Second, "every handler")
			b.waitFinished("calls", n*9/10, n/10, 20*time.Second)
			stopWorker(t, w, done)
			after := b.metrics()

			// The worker's calls are its POSTs: fetches, acks, fails,
			// extends, releases (the test's own reads are GETs).
			var posts, singles float64
			for series, v := range after {
				if !strings.HasPrefix(series, "spool_http_requests_total{") || !strings.Contains(series, `route="POST `) {
					continue
				}
				d := v - before[series]
				posts += d
				if strings.Contains(series, "/v1/jobs/{id}/") {
					singles += d
				}
			}
			delta := func(series string) float64 { return after[series] - before[series] }
			fetches := delta(`spool_http_requests_total{code="200",route="POST /v1/fetch"}`)
			acks := delta(`spool_http_requests_total{code="200",route="POST /v1/jobs/ack"}`)
			fails := delta(`spool_http_requests_total{code="200",route="POST /v1/jobs/fail"}`)
			commits := delta(st.commits)
			t.Logf("%d jobs: %.0f requests (%.0f fetches, %.0f ack calls, %.0f fail calls, %.0f single-job calls), %.0f commits",
				n, posts, fetches, acks, fails, singles, commits)
			if singles > 0 {
				t.Errorf("%.0f calls to single-job routes; a worker sends its outcomes in batches", singles)
			}
			// With 100 handlers, the jobs of a fetch finish together and
			// share calls: under a tenth of a request per job on an idle
			// machine. A quarter of a request or commit per job leaves
			// room for a loaded one and is four times under one ack per
			// job.
			if perJob := posts / n; perJob > 0.25 {
				t.Errorf("%.3f requests per job, want at most 0.25", perJob)
			}
			if perJob := commits / n; perJob > 0.25 {
				t.Errorf("%.3f commits per job, want at most 0.25", perJob)
			}
		})
	}
}
