package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spoolq/spool/internal/config"
)

// scrape reads GET /metrics with token ("" for none) and parses it as
// Prometheus does.
func scrape(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the metrics: %v", err)
	}
	return fams
}

// series finds the series of family name whose labels are labels (all of
// them), or nil.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			return m
		}
	}
	return nil
}

// value is the value of a counter or gauge series, or of a histogram's
// count; -1 when the series is missing.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(fams, name, labels)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

// leaseToken is the fencing token of a fetched job.
func leaseToken(j obj) float64 { return j["lease"].(obj)["token"].(float64) }

// GET /metrics counts exactly what the server ran: jobs acked, failed
// until dead, handed back, cancelled, and one whose lease ran out, each
// kind in its own queue; the queue gauges and histograms agree, and the
// HTTP counters count the requests by route pattern.
func TestMetricsCountWhatRan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fetchOne := func(queue string, extra obj) obj {
		t.Helper()
		body := obj{"queues": []string{queue}, "wait_ms": 10_000}
		for k, v := range extra {
			body[k] = v
		}
		jobs := objs(b.must(200, "POST", "/v1/fetch", body)["jobs"])
		if len(jobs) != 1 {
			t.Fatalf("fetch %s: %d jobs, want 1", queue, len(jobs))
		}
		return jobs[0]
	}
	ack := func(j obj) { b.must(200, "POST", "/v1/jobs/"+j["id"].(string)+"/ack", obj{"token": leaseToken(j)}) }

	// Four jobs run and are acked.
	for range 4 {
		b.enqueue(obj{"queue": "m.ok", "kind": "k"})
	}
	for range 4 {
		ack(fetchOne("m.ok", nil))
	}
	// Two jobs fail twice, the second time for good.
	for range 2 {
		b.enqueue(obj{"queue": "m.bad", "kind": "k", "max_attempts": 2, "backoff": obj{"type": "fixed", "base_ms": 0, "max_ms": 0}})
	}
	for attempt := range 2 {
		for range 2 {
			j := fetchOne("m.bad", nil)
			out := b.must(200, "POST", "/v1/jobs/"+j["id"].(string)+"/fail", obj{"token": leaseToken(j), "error": "boom"})
			if want := []string{"retrying", "dead"}[attempt]; out["state"] != want {
				t.Fatalf("fail of attempt %d: %v, want %s", attempt+1, out, want)
			}
		}
	}
	// A job's lease runs out; the rescuer hands it back, and it runs again.
	b.enqueue(obj{"queue": "m.lease", "kind": "k"})
	lost := fetchOne("m.lease", obj{"lease_ms": 100})
	again := fetchOne("m.lease", nil)
	if again["id"] != lost["id"] || again["attempt"].(float64) != 2 {
		t.Fatalf("after the lease ran out: %v, want job %v again in attempt 2", again, lost["id"])
	}
	ack(again)
	// A job is handed back unrun, then runs.
	b.enqueue(obj{"queue": "m.rel", "kind": "k"})
	j := fetchOne("m.rel", nil)
	b.must(200, "POST", "/v1/jobs/"+j["id"].(string)+"/release", obj{"token": leaseToken(j)})
	ack(fetchOne("m.rel", nil))
	// A scheduled job is cancelled, and one waits.
	b.must(200, "POST", "/v1/jobs/"+b.enqueue(obj{"queue": "m.cxl", "kind": "k", "delay_ms": 3_600_000})+"/cancel", nil)
	enqueuedAt := time.Now()
	b.enqueue(obj{"queue": "m.wait", "kind": "k"})

	fams := scrape(t, b.base, "")
	counters := map[string]map[string]float64{
		"m.ok":    {"enqueued": 4, "started": 4, "completed": 4},
		"m.bad":   {"enqueued": 2, "started": 4, "failed": 2, "dead": 2},
		"m.lease": {"enqueued": 1, "started": 2, "completed": 1, "lease_expired": 1},
		"m.rel":   {"enqueued": 1, "started": 2, "completed": 1, "released": 1},
		"m.cxl":   {"enqueued": 1, "cancelled": 1},
		"m.wait":  {"enqueued": 1},
	}
	for q, want := range counters {
		for _, c := range []string{"enqueued", "started", "completed", "failed", "dead", "cancelled", "released", "lease_expired"} {
			got := value(fams, "spool_jobs_"+c+"_total", map[string]string{"queue": q})
			if got == -1 {
				got = 0 // a counter of a queue without such an event is not made
			}
			if got != want[c] {
				t.Errorf("spool_jobs_%s_total{queue=%q} = %v, want %v", c, q, got, want[c])
			}
		}
		// Every start waited; every attempt that a worker ended by ack or
		// failure ran.
		if got := value(fams, "spool_job_wait_seconds", map[string]string{"queue": q}); want["started"] > 0 && got != want["started"] {
			t.Errorf("spool_job_wait_seconds{queue=%q} counts %v, want %v", q, got, want["started"])
		}
		if ran := want["completed"] + want["failed"] + want["dead"]; ran > 0 {
			if got := value(fams, "spool_job_run_seconds", map[string]string{"queue": q}); got != ran {
				t.Errorf("spool_job_run_seconds{queue=%q} counts %v, want %v", q, got, ran)
			}
		}
	}
	gauges := map[string]map[string]float64{
		"m.ok": {"completed": 4}, "m.bad": {"dead": 2}, "m.lease": {"completed": 1}, "m.rel": {"completed": 1},
		"m.cxl": {"cancelled": 1}, "m.wait": {"available": 1},
	}
	for q, want := range gauges {
		for _, st := range []string{"scheduled", "available", "active", "retrying", "completed", "dead", "cancelled"} {
			if got := value(fams, "spool_jobs", map[string]string{"queue": q, "state": st}); got != want[st] {
				t.Errorf("spool_jobs{queue=%q,state=%q} = %v, want %v", q, st, got, want[st])
			}
		}
		age := value(fams, "spool_queue_oldest_available_age_seconds", map[string]string{"queue": q})
		if q != "m.wait" && age != 0 {
			t.Errorf("oldest available age of %s = %v, want 0 (none available)", q, age)
		}
		if limit := time.Since(enqueuedAt).Seconds() + 1; q == "m.wait" && (age < 0 || age > limit) {
			t.Errorf("oldest available age of %s = %v, want between 0 and %v", q, age, limit)
		}
	}
	// The HTTP counters count by route pattern, never by path.
	if got := value(fams, "spool_http_requests_total", map[string]string{"route": "POST /v1/jobs/{id}/ack", "code": "200"}); got != 6 {
		t.Errorf("acks counted %v, want 6", got)
	}
	if got := value(fams, "spool_http_requests_total", map[string]string{"route": "POST /v1/jobs", "code": "201"}); got != 10 {
		t.Errorf("enqueues counted %v, want 10", got)
	}
	if got := value(fams, "spool_http_request_duration_seconds", map[string]string{"route": "POST /v1/fetch"}); got != 12 {
		t.Errorf("fetch durations counted %v, want 12", got)
	}
	for _, m := range fams["spool_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), "/v1/jobs/0") {
				t.Errorf("a route label holds a job id: %s", l.GetValue())
			}
		}
	}
	// The store's group commits were timed and sized.
	if got := value(fams, "spool_store_commit_seconds", map[string]string{"store": "disk"}); got < 1 {
		t.Errorf("disk commits counted %v, want some", got)
	}
	if got := value(fams, "spool_store_commit_jobs", map[string]string{"store": "disk"}); got < 1 {
		t.Errorf("disk commit sizes counted %v, want some", got)
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Errorf("the Go runtime or process metrics are missing")
	}

	// A path that matches no route counts as one label value.
	b.call("GET", "/v1/no/such/01JD3Y6Q4H2V8M5N7P9R0S1T2V", nil)
	b.call("GET", "/v1/no/such/other", nil)
	if got := value(scrape(t, b.base, ""), "spool_http_requests_total", map[string]string{"route": "unmatched", "code": "404"}); got != 2 {
		t.Errorf("unmatched requests counted %v, want 2", got)
	}
}

// With auth on, the metrics need a token of permission read that is not
// limited to namespaces.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	const admin, reader, limited = "admin-secret-0123456789", "reader-secret-0123456789", "limited-secret-0123456789"
	b := setup(t, func(c *config.Config) {
		c.Auth = true
		c.AuthTokens = config.Secret("ops admin * " + admin + "\ndash read-only * " + reader + "\nbilling producer billing. " + limited)
	})
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong-secret-0123456789", http.StatusUnauthorized}, {limited, http.StatusForbidden},
		{admin, http.StatusOK}, {reader, http.StatusOK}} {
		if resp := send(t, "GET", b.base+"/metrics", "", c.token); resp.StatusCode != c.want {
			t.Errorf("token %q: %d, want %d", c.token, resp.StatusCode, c.want)
		}
	}
	if fams := scrape(t, b.base, admin); value(fams, "spool_http_requests_total", map[string]string{"route": "GET /metrics", "code": "403"}) != 1 {
		t.Errorf("the refused scrape was not counted")
	}
}
