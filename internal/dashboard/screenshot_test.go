package dashboard_test

import (
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"
)

// TestScreenshots fills a server with a few queues and some seconds of
// traffic, then opens the overview, a queue, a job, the dead letters and
// a worker at laptop width.
// It checks that the chart has drawn the traffic; with SPOOL_SCREENSHOTS
// set (to a folder, relative to the repository's root, such as
// docs/img) it writes the pages there as PNG.
func TestScreenshots(t *testing.T) {
	b := setup(t)
	for _, q := range []string{"emails", "webhooks", "reports", "thumbnails"} {
		b.must(200, "POST", "/v1/queues/"+q+"/resume", nil)
	}
	b.must(200, "PUT", "/v1/queues/webhooks/limits", obj{"rate": obj{"limit": 50, "period_ms": 1000}, "max_active": 20})
	b.must(200, "PUT", "/v1/queues/emails/settings", obj{"dead_letter_queue": "emails-dlq", "max_wait_ms": 600000})
	b.must(201, "PUT", "/v1/schedules/digest", obj{"cron": "*/15 * * * *", "job": obj{"queue": "emails", "kind": "send_digest"}})
	b.must(201, "PUT", "/v1/queues/emails/consumer-groups/audit", obj{"start": "new"})

	// Traffic: a wave of completions with a burst of failures.
	start := time.Now()
	step := 0
	for time.Since(start) < 8*time.Second {
		phase := float64(step) / 10
		n := 4 + int(6*(1+math.Sin(phase)))
		jobs := make([]obj, n)
		for i := range jobs {
			jobs[i] = obj{"queue": "emails", "kind": "send_welcome", "payload": obj{"to": fmt.Sprintf("user%d@example.com", step*100+i)}, "tags": []string{"signup"}}
		}
		b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
		b.complete("emails", n)
		if step%5 == 0 {
			b.kill("webhooks", "POST https://hooks.example.com/orders: 503 Service Unavailable", obj{"order": step})
		}
		b.enqueue(obj{"queue": "webhooks", "kind": "deliver", "payload": obj{"order": step}})
		b.complete("webhooks", 1)
		step++
		time.Sleep(150 * time.Millisecond)
	}
	for i := range 40 {
		b.enqueue(obj{"queue": "emails", "kind": "send_welcome", "payload": obj{"to": fmt.Sprintf("late%d@example.com", i)}, "tags": []string{"signup"}})
	}
	for i := range 12 {
		b.enqueue(obj{"queue": "reports", "kind": "build_report", "payload": obj{"month": fmt.Sprintf("2026-%02d", i%12+1)}})
	}
	b.enqueue(obj{"queue": "thumbnails", "kind": "resize", "payload": obj{"image": "cat.png"}, "run_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	b.must(200, "POST", "/v1/queues/reports/pause", nil)
	b.kill("emails", "smtp: 550 5.1.1 mailbox unavailable", obj{"to": "nobody@example.com"})

	// A job that failed three times and died, with a progress report.
	id := b.enqueue(obj{"queue": "reports", "kind": "build_report", "max_attempts": 3, "priority": 10,
		"backoff": obj{"type": "fixed", "base_ms": 0}, "tags": []string{"monthly", "finance"},
		"payload": obj{"month": "2026-10", "format": "pdf", "recipients": []string{"cfo@example.com", "ops@example.com"}}})
	b.must(200, "POST", "/v1/queues/reports/resume", nil)
	msgs := []string{"dial tcp 10.0.3.7:5432: connect: connection refused", "context deadline exceeded after 30s", "pq: relation \"ledger_2026_10\" does not exist"}
	for _, msg := range msgs {
		var j leased
		deadline := time.Now().Add(10 * time.Second)
		for j.ID != id {
			if time.Now().After(deadline) {
				t.Fatalf("the report job did not come back for another attempt")
			}
			for _, got := range b.fetchAs("reports", "reports-7f9c/pid 4121", 100) {
				if got.ID == id {
					j = got
				} else {
					b.must(200, "POST", "/v1/jobs/"+got.ID+"/release", obj{"token": got.Token})
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.must(200, "POST", "/v1/jobs/"+id+"/progress", obj{"token": j.Token, "progress": obj{"rows": 18200, "of": 52000}})
		b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": j.Token, "error": msg})
	}
	b.must(200, "POST", "/v1/queues/reports/pause", nil)
	if got := b.state(id); got != "dead" {
		t.Fatalf("the report job is %s, want dead", got)
	}
	// Two mailers at work, holding some of the emails.
	b.fetchAs("emails", "mailer-a1c3/pid 311", 6)
	b.fetchAs("emails", "mailer-b7e2/pid 298", 3)

	tb := b.open()
	tb.visit("/")
	tb.click(`button[data-span="60"]`)
	tb.waitFor("the chart with traffic", `document.querySelector("[data-throughput]").dataset.points === "60"`)
	drawn := eval[int](tb, `fetch('/ui/throughput.json?span=60').then(r => r.json()).then(j => j.completed.filter(n => n > 0).length)`)
	if drawn < 5 {
		t.Errorf("the chart has %d seconds with completions, want the traffic of the last seconds", drawn)
	}
	time.Sleep(300 * time.Millisecond) // let the chart paint
	tb.screenshot("dashboard-overview.png", true)

	tb.visit("/ui/queues/emails")
	if tb.count("tr[data-job]") != 50 {
		t.Errorf("the emails page lists %d jobs, want a full page of 50", tb.count("tr[data-job]"))
	}
	tb.click(`button[data-span="60"]`)
	tb.waitFor("the queue's chart", `document.querySelector("[data-throughput]").dataset.points === "60"`)
	eval[bool](tb, `(() => { window.scrollTo(0, 0); return true })()`)
	time.Sleep(300 * time.Millisecond)
	tb.screenshot("dashboard-queue.png", false)

	tb.visit("/ui/jobs/" + id)
	if got := tb.count("ol.errors li"); got != 3 {
		t.Errorf("the job page lists %d failed attempts, want 3", got)
	}
	tb.screenshot("dashboard-job.png", true)

	tb.visit("/ui/dead")
	tb.screenshot("dashboard-dead.png", true)

	tb.visit("/ui/workers?worker=" + url.QueryEscape("mailer-a1c3/pid 311"))
	if got := tb.count(".held tr[data-job]"); got != 6 {
		t.Errorf("the mailer's entry lists %d jobs, want 6", got)
	}
	tb.screenshot("dashboard-workers.png", true)
}
