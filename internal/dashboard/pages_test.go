package dashboard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOverview: the overview lists every queue with its counts, paused
// flag and oldest available job, the node's totals, and draws the
// throughput chart from the jobs that completed and failed.
func TestOverview(t *testing.T) {
	b := setup(t)
	for i := range 3 {
		b.enqueue(obj{"queue": "emails", "kind": "send", "payload": obj{"n": i}})
	}
	b.complete("emails", 2)
	b.kill("reports", "disk full", obj{"r": 1})
	b.enqueue(obj{"queue": "reports", "kind": "build"})
	b.must(200, "POST", "/v1/queues/reports/pause", nil)

	tb := b.open()
	tb.visit("/")
	if got := tb.text(`tr[data-queue="emails"] td[data-state="completed"]`); got != "2" {
		t.Errorf("emails completed = %q, want 2", got)
	}
	if got := tb.text(`tr[data-queue="emails"] td[data-state="available"]`); got != "1" {
		t.Errorf("emails available = %q, want 1", got)
	}
	if got := tb.text(`tr[data-queue="reports"] td[data-state="dead"]`); got != "1" {
		t.Errorf("reports dead = %q, want 1", got)
	}
	if tb.count(`tr[data-queue="reports"] .badge.paused`) != 1 || tb.count(`tr[data-queue="emails"] .badge.paused`) != 0 {
		t.Error("the paused badge should mark reports only")
	}
	if got := tb.text(`[data-total="completed"]`); got != "2" {
		t.Errorf("total completed = %q, want 2", got)
	}
	if got := tb.text(`[data-total="available"]`); got != "2" {
		t.Errorf("total available = %q, want 2", got)
	}
	if got := tb.text(`tr[data-queue="emails"] td:last-child`); !strings.HasSuffix(got, " ms") && !strings.HasSuffix(got, " s") {
		t.Errorf("emails oldest available = %q, want an age", got)
	}
	// The chart draws from the sampler: 2 completed and 1 failed.
	tb.waitFor("the chart", `document.querySelector('[data-throughput][data-ready="true"] canvas') !== null`)
	sums := eval[[]int](tb, `fetch('/ui/throughput.json').then(r => r.json()).then(j => [j.completed.reduce((a, b) => a + b, 0), j.failed.reduce((a, b) => a + b, 0), j.t.length])`)
	if sums[0] != 2 || sums[1] != 1 || sums[2] != 600 {
		t.Errorf("throughput sums (completed, failed, points) = %v, want [2 1 600]", sums)
	}
	tb.click(`button[data-span="60"]`)
	tb.waitFor("a one-minute chart", `document.querySelector("[data-throughput]").dataset.points === "60"`)
	if got := tb.text("title"); got != "Overview · Spool" {
		t.Errorf("title = %q", got)
	}
}

// TestOverviewLive: a job completed after the page loaded shows up
// without a reload.
func TestOverviewLive(t *testing.T) {
	b := setup(t)
	b.enqueue(obj{"queue": "live", "kind": "k"})
	tb := b.open()
	tb.visit("/")
	tb.waitText(`tr[data-queue="live"] td[data-state="completed"]`, "0")
	tb.mark()
	b.complete("live", 1)
	tb.waitText(`tr[data-queue="live"] td[data-state="completed"]`, "1")
	tb.waitText(`[data-total="completed"]`, "1")
	if !tb.marked() {
		t.Error("the page reloaded; the update should have come without a reload")
	}
}

// TestQueuePage: the queue page lists the queue's jobs by state, pages
// through them with a cursor, and shows its settings, schedules and
// consumer groups.
func TestQueuePage(t *testing.T) {
	b := setup(t)
	var ids []string
	for i := range 60 {
		ids = append(ids, b.enqueue(obj{"queue": "orders", "kind": "ship", "payload": obj{"n": i}}))
	}
	b.complete("orders", 5)
	b.must(200, "PUT", "/v1/queues/orders/limits", obj{"rate": obj{"limit": 100, "period_ms": 60000}, "max_active": 7})
	b.must(200, "PUT", "/v1/queues/orders/settings", obj{"dead_letter_queue": "orders-dlq", "max_wait_ms": 120000})
	b.must(201, "PUT", "/v1/schedules/nightly", obj{"cron": "0 3 * * *", "job": obj{"queue": "orders", "kind": "sweep"}})
	b.must(201, "PUT", "/v1/schedules/elsewhere", obj{"every_ms": 60000, "job": obj{"queue": "other", "kind": "x"}})
	b.must(201, "PUT", "/v1/queues/orders/consumer-groups/billing", obj{"start": "beginning"})

	tb := b.open()
	tb.visit("/ui/queues/orders")
	if got := tb.text("h1"); got != "orders" {
		t.Errorf("h1 = %q", got)
	}
	if got := tb.text(`.tabs a[data-state="available"] .count`); got != "55" {
		t.Errorf("available tab count = %q, want 55", got)
	}
	if got := tb.text(`.tabs a[data-state="completed"] .count`); got != "5" {
		t.Errorf("completed tab count = %q, want 5", got)
	}
	// Every state, in enqueue order: a page of 50, then the next 10.
	if n := tb.count("tr[data-job]"); n != 50 {
		t.Errorf("first page rows = %d, want 50", n)
	}
	if tb.count(`tr[data-job="`+ids[0]+`"]`) != 1 {
		t.Error("the first page should start with the first job")
	}
	tb.click(`.pager a[rel="next"]`)
	tb.waitFor("the second page", `document.querySelectorAll("tr[data-job]").length === 10`)
	if tb.count(`tr[data-job="`+ids[59]+`"]`) != 1 {
		t.Error("the second page should end with the last job")
	}
	if tb.count(`.pager a[rel="next"]`) != 0 {
		t.Error("the last page has no next page")
	}
	// One state.
	tb.visit("/ui/queues/orders?state=completed")
	if n := tb.count("tr[data-job]"); n != 5 {
		t.Errorf("completed rows = %d, want 5", n)
	}
	if tb.count(`tr[data-job] .state.s-completed`) != 5 {
		t.Error("the completed listing should show completed jobs only")
	}
	// Settings, schedules, consumer groups.
	settings := tb.text(".settings")
	for _, want := range []string{"full", "100 per 1 min", "7", "orders-dlq", "2 min"} {
		if !strings.Contains(settings, want) {
			t.Errorf("settings %q lack %q", settings, want)
		}
	}
	schedules := tb.text(".schedules")
	if !strings.Contains(schedules, "nightly") || !strings.Contains(schedules, "0 3 * * *") || strings.Contains(schedules, "elsewhere") {
		t.Errorf("schedules = %q, want nightly (and not elsewhere, which goes to another queue)", schedules)
	}
	if got := tb.text(`tr[data-consumer-group="billing"] td:nth-child(2)`); got != "60" {
		t.Errorf("consumer group lag = %q, want 60 (every job of the queue, none finished)", got)
	}
}

// TestQueueFilters: filters by kind, tag and text in the payload or the
// errors narrow the listing, and a scan past its bound says so.
func TestQueueFilters(t *testing.T) {
	b := setup(t)
	email := b.enqueue(obj{"queue": "mixed", "kind": "email", "tags": []string{"vip"}, "payload": obj{"to": "ada@example.com"}})
	sms := b.enqueue(obj{"queue": "mixed", "kind": "sms", "tags": []string{"bulk"}, "payload": obj{"to": "+44 20 7946 0000"}})
	dead := b.kill("mixed", "SMTP 550: Mailbox Unavailable", obj{"to": "bob@example.com"})

	tb := b.open()
	tb.visit("/ui/queues/mixed")
	tb.do("filter by kind",
		sendKeys(`input[name="kind"]`, "sms"),
		submit(`form.filters`))
	tb.waitFor("the kind filter", `location.search.includes("kind=sms")`)
	// The listing is swapped in after the address changes.
	tb.waitFor("the filtered rows", fmt.Sprintf(`Array.from(document.querySelectorAll("tr[data-job]")).map(r => r.dataset.job).join(",") === %q`, sms))
	assertRows(t, tb, sms)

	tb.visit("/ui/queues/mixed?tag=vip")
	assertRows(t, tb, email)
	tb.visit("/ui/queues/mixed?q=ADA%40EXAMPLE")
	assertRows(t, tb, email)
	tb.visit("/ui/queues/mixed?q=mailbox+unavailable")
	assertRows(t, tb, dead)
	tb.visit("/ui/queues/mixed?kind=email&tag=bulk")
	assertRows(t, tb)
	if tb.count("[data-bounded]") != 0 {
		t.Error("a scan of 3 jobs is not bounded")
	}

	// More jobs than a filter reads for one page: the page says so.
	jobs := make([]obj, 5100)
	for i := range jobs {
		jobs[i] = obj{"queue": "deep", "kind": "bulk", "payload": obj{"i": i}}
	}
	b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
	tb.visit("/ui/queues/deep?q=nothing-matches-this")
	if tb.count("[data-bounded]") != 1 {
		t.Fatalf("a filter over 5,100 jobs should say it stopped; page: %s", tb.text("main"))
	}
	if got := tb.text("[data-bounded]"); !strings.Contains(got, "5,000") {
		t.Errorf("bound note = %q, want it to say 5,000", got)
	}
	tb.click("[data-bounded] a")
	tb.waitFor("the rest of the scan", `document.querySelector("[data-bounded]") === null && document.querySelector(".empty") !== null`)
}

func assertRows(t *testing.T, tb *tab, ids ...string) {
	t.Helper()
	got := eval[[]string](tb, `Array.from(document.querySelectorAll("tr[data-job]")).map(r => r.dataset.job)`)
	if fmt.Sprint(got) != fmt.Sprint(ids) && !(len(got) == 0 && len(ids) == 0) {
		t.Errorf("rows = %v, want %v", got, ids)
	}
}

// TestPauseResume: pausing a queue from its page shows it paused and
// hands out nothing; resuming undoes it.
func TestPauseResume(t *testing.T) {
	b := setup(t)
	id := b.enqueue(obj{"queue": "pausy", "kind": "k"})
	tb := b.open()
	tb.visit("/ui/queues/pausy")
	tb.click(`button[data-action="pause"]`)
	tb.waitFor("the paused badge", `document.querySelector("#head [data-paused]") !== null`)
	if got := tb.text("#flash"); !strings.Contains(got, "Paused pausy") {
		t.Errorf("flash = %q", got)
	}
	if jobs := b.fetch("pausy", 1); len(jobs) != 0 {
		t.Fatalf("a paused queue handed out %v", jobs)
	}
	tb.visit("/")
	if tb.count(`tr[data-queue="pausy"] .badge.paused`) != 1 {
		t.Error("the overview should show pausy paused")
	}
	tb.visit("/ui/queues/pausy")
	tb.click(`button[data-action="resume"]`)
	tb.waitFor("the badge to go", `document.querySelector("#head [data-paused]") === null && document.querySelector('button[data-action="pause"]') !== null`)
	if jobs := b.fetch("pausy", 1); len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("a resumed queue should hand out %s, got %v", id, jobs)
	}
}

// TestPurge: purging deletes the queue's available jobs, and only those.
func TestPurge(t *testing.T) {
	b := setup(t)
	for range 4 {
		b.enqueue(obj{"queue": "trash", "kind": "k"})
	}
	b.complete("trash", 1)
	tb := b.open()
	tb.visit("/ui/queues/trash")
	tb.click(`button[data-action="purge"]`)
	tb.waitFor("the flash", `document.querySelector("#flash").textContent.includes("deleted 3 available jobs")`)
	tb.waitText(`.tabs a[data-state="available"] .count`, "0")
	if c := b.counts("trash"); c["available"] != 0 || c["completed"] != 1 {
		t.Errorf("counts after purge = %v, want no available and the completed job kept", c)
	}
}

// TestQueueDeadActions: retry all dead brings the queue's dead jobs back
// (a fetch gets them); delete all dead removes them.
func TestQueueDeadActions(t *testing.T) {
	b := setup(t)
	d1 := b.kill("q", "boom", obj{})
	d2 := b.kill("q", "boom", obj{})
	tb := b.open()
	tb.visit("/ui/queues/q")
	tb.click(`button[data-action="retry-dead"]`)
	tb.waitFor("the flash", `document.querySelector("#flash").textContent.includes("Retried 2 dead jobs")`)
	tb.waitText(`.tabs a[data-state="dead"] .count`, "0")
	got := map[string]bool{}
	for _, j := range b.fetch("q", 10) {
		got[j.ID] = true
	}
	if !got[d1] || !got[d2] {
		t.Fatalf("a fetch after retry all dead got %v, want %s and %s", got, d1, d2)
	}

	d3 := b.kill("q", "again", obj{})
	tb.visit("/ui/queues/q")
	tb.click(`button[data-action="delete-dead"]`)
	tb.waitFor("the flash", `document.querySelector("#flash").textContent.includes("Deleted 1 dead job")`)
	if status, _ := b.call("GET", "/v1/jobs/"+d3, nil); status != 404 {
		t.Errorf("deleted dead job: status %d, want 404", status)
	}
}

// TestJobPage: the job page shows the payload as pretty JSON (escaped:
// it is user data), the state, the attempts with their errors and the
// timeline; retry, cancel and delete act on the job.
func TestJobPage(t *testing.T) {
	b := setup(t)
	id := b.kill("jobs", "first failure <b>not bold</b>", obj{"user": "ada", "html": "<img src=x onerror=alert(1)>"})
	tb := b.open()
	tb.visit("/ui/jobs/" + id)
	if got := tb.text(`#live .state`); got != "dead" {
		t.Errorf("state = %q, want dead", got)
	}
	payload := eval[string](tb, `document.querySelector('[data-field="payload"]').textContent`)
	if !strings.Contains(payload, "\n  \"user\": \"ada\"") || !strings.Contains(payload, "<img src=x onerror=alert(1)>") {
		t.Errorf("payload = %q, want it indented and shown as text", payload)
	}
	if tb.count("main img") != 0 || tb.count("main b") != 0 {
		t.Error("user data became markup")
	}
	if got := tb.text("ol.errors"); !strings.Contains(got, "attempt 1") || !strings.Contains(got, "first failure <b>not bold</b>") {
		t.Errorf("errors = %q", got)
	}
	steps := eval[[]string](tb, `Array.from(document.querySelectorAll("ol.timeline .what")).map(e => e.textContent)`)
	if fmt.Sprint(steps) != "[created attempt 1 started attempt 1 failed dead]" {
		t.Errorf("timeline = %v", steps)
	}
	if title := eval[string](tb, `document.querySelector("ol.timeline time").title`); !strings.HasSuffix(title, " UTC") {
		t.Errorf("a relative time should carry the exact time in its title, got %q", title)
	}
	if tb.count(`button[data-action="cancel"]`) != 0 {
		t.Error("a dead job cannot be cancelled: no button")
	}

	// Retry: the job is available again, and a fetch gets it.
	tb.mark()
	tb.click(`button[data-action="retry"]`)
	tb.waitText(`#live .state`, "available")
	if !tb.marked() {
		t.Error("the job page reloaded after retry")
	}
	jobs := b.fetch("jobs", 1)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("a fetch after retry got %v, want %s", jobs, id)
	}
	tb.waitText(`#live .state`, "active") // the live part follows the job
	b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": jobs[0].Token, "result": obj{"sent": true}})
	tb.waitText(`#live .state`, "completed")
	if got := tb.text(`[data-field="result"]`); !strings.Contains(got, `"sent": true`) {
		t.Errorf("result = %q", got)
	}

	// Cancel an available job.
	other := b.enqueue(obj{"queue": "jobs", "kind": "k", "run_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	tb.visit("/ui/jobs/" + other)
	if got := tb.text(`#live .state`); got != "scheduled" {
		t.Errorf("state = %q, want scheduled", got)
	}
	tb.click(`button[data-action="cancel"]`)
	tb.waitText(`#live .state`, "cancelled")
	if got := b.state(other); got != "cancelled" {
		t.Errorf("state by the API = %q, want cancelled", got)
	}

	// Delete: gone, and the browser is on the queue's page.
	tb.click(`button[data-action="delete"]`)
	tb.waitFor("the queue page", `location.pathname === "/ui/queues/jobs" && document.readyState === "complete"`)
	if status, _ := b.call("GET", "/v1/jobs/"+other, nil); status != 404 {
		t.Errorf("deleted job: status %d, want 404", status)
	}
	tb.visit("/ui/jobs/" + other)
	if got := tb.text("h1"); !strings.HasPrefix(got, "404") {
		t.Errorf("a deleted job's page: h1 = %q, want 404", got)
	}
}

// TestDeadLetters: dead jobs of every queue are listed by their last
// error; retrying an error's jobs brings them back (a fetch gets them)
// and takes the error off the list.
func TestDeadLetters(t *testing.T) {
	b := setup(t)
	deploy1 := b.kill("a", "TypeError: x is undefined", obj{})
	deploy2 := b.kill("b", "TypeError: x is undefined", obj{})
	deploy3 := b.kill("b", "TypeError: x is undefined", obj{})
	lone := b.kill("a", "timeout", obj{})
	tb := b.open()
	tb.visit("/ui/dead")
	if n := tb.count("tr[data-error]"); n != 2 {
		t.Fatalf("errors = %d, want 2", n)
	}
	first := `tr[data-error]:first-child`
	if got := tb.text(first + " td.error"); got != "TypeError: x is undefined" {
		t.Errorf("most common error's error = %q", got)
	}
	if got := tb.text(first + " [data-count]"); got != "3" {
		t.Errorf("most common error's count = %q, want 3", got)
	}
	if got := tb.text(first + " td:nth-child(3)"); got != "a b" {
		t.Errorf("most common error's queues = %q, want a b", got)
	}
	tb.click(first + ` button[data-action="retry-error"]`)
	tb.waitFor("the flash", `document.querySelector("#flash").textContent.includes("Retried 3 dead jobs")`)
	tb.waitFor("the error to leave", `document.querySelectorAll("tr[data-error]").length === 1`)
	if got := tb.text("tr[data-error] td.error"); got != "timeout" {
		t.Errorf("remaining error = %q, want timeout", got)
	}
	got := map[string]bool{}
	for _, q := range []string{"a", "b"} {
		for _, j := range b.fetch(q, 10) {
			got[j.ID] = true
		}
	}
	if !got[deploy1] || !got[deploy2] || !got[deploy3] || got[lone] {
		t.Errorf("fetched %v after the retry, want the three with the error and not %s", got, lone)
	}
}

// TestDarkMode: the colours follow the system's preference.
func TestDarkMode(t *testing.T) {
	b := setup(t)
	tb := b.open()
	bg := func(scheme string) string {
		tb.do("emulate "+scheme, emulateScheme(scheme))
		tb.visit("/")
		return eval[string](tb, `getComputedStyle(document.body).backgroundColor`)
	}
	light, dark := bg("light"), bg("dark")
	if light == dark {
		t.Errorf("the background is %s in light and dark mode alike", light)
	}
}

// TestPhoneWidth: on a phone's width the page does not scroll sideways;
// wide tables scroll inside their own box.
func TestPhoneWidth(t *testing.T) {
	b := setup(t)
	b.enqueue(obj{"queue": "a-rather-long-queue-name-for-a-phone", "kind": "k"})
	tb := b.open()
	tb.do("phone viewport", viewport(390, 844))
	tb.visit("/")
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %d px wide on a 390 px screen", w)
	}
}

// TestStatic: the vendored libraries are served by the binary itself.
func TestStatic(t *testing.T) {
	b := setup(t)
	tb := b.open()
	tb.visit("/")
	if v := eval[string](tb, `typeof htmx === "object" ? htmx.version : ""`); v != "4.0.1" {
		t.Errorf("htmx version = %q, want the vendored 4.0.1", v)
	}
	if v := eval[string](tb, `typeof uPlot`); v != "function" {
		t.Errorf("uPlot is %q", v)
	}
	external := eval[int](tb, `Array.from(document.querySelectorAll("script[src], link[href]")).filter(e => new URL(e.src || e.href).origin !== location.origin).length`)
	if external != 0 {
		t.Errorf("%d scripts or stylesheets come from elsewhere", external)
	}
}
