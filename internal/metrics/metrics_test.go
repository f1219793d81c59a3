package metrics

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Events count under their queue, a consumer group's copies under their
// lane, and past MaxQueues under OtherQueue; wait and run times go to
// their histograms.
func TestObserveCountsByQueue(t *testing.T) {
	t.Parallel()
	m := New(Config{MaxQueues: 2})
	at := time.Now()
	started := events.Of(events.Started, at, "j1", "a")
	started.Waited = 3 * time.Second
	done := events.Of(events.Completed, at, "j1", "a")
	done.Ran = 2 * time.Second
	m.Observe([]events.Event{events.Of(events.Enqueued, at, "j1", "a"), started, done,
		events.Of(events.Enqueued, at, "j2", job.LaneName("a", "billing")), events.Of(events.Enqueued, at, "j3", "c")})
	m.Rescued(map[string]int{"a": 2, "d": 1})
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.enqueued.WithLabelValues("a")), 1, "enqueued in a"},
		{testutil.ToFloat64(m.enqueued.WithLabelValues("a@billing")), 1, "enqueued in the lane of a's group billing"},
		{testutil.ToFloat64(m.enqueued.WithLabelValues(OtherQueue)), 1, "enqueued past the bound"},
		{testutil.ToFloat64(m.started.WithLabelValues("a")), 1, "started in a"},
		{testutil.ToFloat64(m.completed.WithLabelValues("a")), 1, "completed in a"},
		{testutil.ToFloat64(m.leaseExpired.WithLabelValues("a")), 2, "expired in a"},
		{testutil.ToFloat64(m.leaseExpired.WithLabelValues(OtherQueue)), 1, "expired past the bound"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	out := scrape(t, m)
	for _, want := range []string{`spool_job_wait_seconds_sum{queue="a"} 3`, `spool_job_run_seconds_sum{queue="a"} 2`,
		`spool_job_run_seconds_bucket{queue="a",le="2.5"} 1`, `spool_job_run_seconds_bucket{queue="a",le="1"} 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
}

// The queue listing answers scrapes for CacheFor, with ages measured at
// each scrape.
func TestQueueGaugesAreCached(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	m := New(Config{
		Queues: func(context.Context) ([]job.QueueInfo, error) {
			calls.Add(1)
			return []job.QueueInfo{{Name: "q", Counts: map[job.State]int64{job.StateAvailable: 7}, OldestAvailable: now.Add(-time.Minute)}}, nil
		},
		CacheFor: time.Hour,
		Now:      func() time.Time { return time.Unix(0, clock.Load()).UTC() },
	})
	first := scrape(t, m)
	clock.Add(int64(30 * time.Second))
	second := scrape(t, m)
	if calls.Load() != 1 {
		t.Errorf("two scrapes listed the queues %d times, want once", calls.Load())
	}
	for _, c := range []struct{ out, want string }{
		{first, `spool_queue_oldest_available_age_seconds{queue="q"} 60`},
		{second, `spool_queue_oldest_available_age_seconds{queue="q"} 90`},
		{second, `spool_jobs{queue="q",state="available"} 7`},
		{second, `spool_jobs{queue="q",state="dead"} 0`},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("metrics lack %s:\n%s", c.want, c.out)
		}
	}
}

// Requests count by route and status; commits by store.
func TestRequestsAndCommits(t *testing.T) {
	t.Parallel()
	m := New(Config{})
	m.ObserveRequest("POST /v1/jobs/{id}/ack", 200, time.Millisecond)
	m.ObserveRequest("POST /v1/jobs/{id}/ack", 200, time.Millisecond)
	m.ObserveRequest("", 404, time.Millisecond)
	m.CommitObserver("disk")(store.CommitStats{Elapsed: time.Millisecond, Calls: 3, Jobs: 300})
	m.CommitObserver("postgres")(store.CommitStats{Elapsed: time.Millisecond, Calls: 1})
	out := scrape(t, m)
	for _, want := range []string{`spool_http_requests_total{code="200",route="POST /v1/jobs/{id}/ack"} 2`,
		`spool_http_requests_total{code="404",route="unmatched"} 1`, `spool_http_request_duration_seconds_count{route="unmatched"} 1`,
		`spool_store_commit_seconds_count{store="disk"} 1`, `spool_store_commit_jobs_sum{store="disk"} 300`,
		`spool_store_commit_seconds_count{store="postgres"} 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `spool_store_commit_jobs_count{store="postgres"}`) {
		t.Errorf("a store that counts no jobs has a commit size series")
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// BenchmarkObserveJob is what the counters cost one job of a busy queue:
// its enqueue, start and ack events, told in batches of 100 as the
// engine tells a batch call's.
func BenchmarkObserveJob(b *testing.B) {
	m := New(Config{})
	at := time.Now()
	batch := func(t events.Type) []events.Event {
		evs := make([]events.Event, 100)
		for i := range evs {
			evs[i] = events.Of(t, at, "j", "emails")
			evs[i].Waited, evs[i].Ran = time.Millisecond, 20*time.Millisecond
		}
		return evs
	}
	enq, start, done := batch(events.Enqueued), batch(events.Started), batch(events.Completed)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 100 {
		m.Observe(enq)
		m.Observe(start)
		m.Observe(done)
	}
}

// BenchmarkObserveRequest is what counting one HTTP request costs.
func BenchmarkObserveRequest(b *testing.B) {
	m := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest("POST /v1/jobs/{id}/ack", 200, time.Millisecond)
	}
}
