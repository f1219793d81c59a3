package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// fetchAs leases up to max jobs of queue without waiting, as the worker
// named worker.
func (b *bundle) fetchAs(queue, worker string, max int) []leased {
	b.t.Helper()
	out := b.must(200, "POST", "/v1/fetch", obj{"queues": []string{queue}, "max": max, "worker": worker})
	var jobs []leased
	for _, j := range out["jobs"].([]any) {
		m := j.(obj)
		jobs = append(jobs, leased{ID: m["id"].(string), Token: m["lease"].(obj)["token"].(float64)})
	}
	return jobs
}

// ack acks a leased job.
func (b *bundle) ack(j leased) {
	b.t.Helper()
	b.must(200, "POST", "/v1/jobs/"+j.ID+"/ack", obj{"token": j.Token})
}

// workerRow is the CSS selector of worker's row on the workers page.
func workerRow(worker string) string { return `tr[data-worker=` + jsString(worker) + `]` }

// heldIDs are the ids of the jobs the workers page lists as held.
func heldIDs(tb *tab) []string {
	tb.t.Helper()
	ids := eval[[]string](tb, `Array.from(document.querySelectorAll(".held tr[data-job]")).map(r => r.dataset.job)`)
	slices.Sort(ids)
	return ids
}

// TestWorkersPage: a worker that fetched jobs is listed with the active
// jobs it holds (its name, user data, shown as text); its entry lists
// those jobs, each linking to its job page; the job page names the
// holder and its lease while the job is active, and "last run by" after
// the ack, linking back to the worker.
func TestWorkersPage(t *testing.T) {
	b := setup(t)
	const alice = "host-1/pid 7 <i>alice</i> & co"
	for range 3 {
		b.enqueue(obj{"queue": "mail", "kind": "send"})
	}
	b.enqueue(obj{"queue": "img", "kind": "resize"})
	held := b.fetchAs("mail", alice, 2)
	if len(held) != 2 {
		t.Fatalf("alice fetched %d jobs, want 2", len(held))
	}
	done := b.fetchAs("mail", alice, 1)
	b.ack(done[0])
	if got := b.fetchAs("img", "bob", 1); len(got) != 1 {
		t.Fatalf("bob fetched %d jobs, want 1", len(got))
	}
	want := []string{held[0].ID, held[1].ID}
	slices.Sort(want)

	tb := b.open()
	tb.visit("/")
	tb.click(`.top nav a[href="/ui/workers"]`)
	tb.waitFor("the workers page", `location.pathname === "/ui/workers" && document.querySelector("table.workers") !== null`)
	if got := tb.text(`.top nav a[aria-current]`); got != "Workers" {
		t.Errorf("the nav marks %q, want Workers", got)
	}
	names := eval[[]string](tb, `Array.from(document.querySelectorAll("tr[data-worker]")).map(r => r.dataset.worker)`)
	if fmt.Sprint(names) != fmt.Sprint([]string{"bob", alice}) {
		t.Errorf("workers = %q, want bob and alice, by name", names)
	}
	if got := tb.text(workerRow(alice) + " [data-active]"); got != "2" {
		t.Errorf("alice's active jobs = %q, want 2 (the acked one is not held)", got)
	}
	if got := tb.text(workerRow("bob") + " [data-active]"); got != "1" {
		t.Errorf("bob's active jobs = %q, want 1", got)
	}
	if got := tb.text(workerRow(alice) + " a"); got != alice {
		t.Errorf("alice's name reads %q", got)
	}
	if tb.count("main i") != 0 {
		t.Error("a worker's name became markup")
	}
	titles := eval[[]string](tb, `Array.from(document.querySelectorAll(`+jsString(workerRow(alice)+" time")+`)).map(e => e.title)`)
	if len(titles) != 2 || !strings.HasSuffix(titles[0], " UTC") || !strings.HasSuffix(titles[1], " UTC") {
		t.Errorf("first and last seen should carry the exact time on hover, got %q", titles)
	}

	// Alice's entry: the jobs she holds, since when, each linking to its
	// page.
	tb.click(workerRow(alice) + " a")
	tb.waitFor("alice's jobs", `document.querySelector(".held") !== null`)
	if got := eval[string](tb, `new URLSearchParams(location.search).get("worker")`); got != alice {
		t.Errorf("the entry's URL names %q, want alice", got)
	}
	if got := heldIDs(tb); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alice holds %v on the page, want %v", got, want)
	}
	if tb.count(".held td[data-field=since] time") != 2 {
		t.Error("each held job should say since when (its start)")
	}
	if tb.count(workerRow(alice)+"[aria-current]") != 1 {
		t.Error("alice's row should be marked")
	}
	if tb.count("main i") != 0 {
		t.Error("a worker's name became markup on its entry")
	}
	tb.click(`.held tr[data-job="` + held[0].ID + `"] a[href^="/ui/jobs/"]`)
	tb.waitFor("the job page", `location.pathname === "/ui/jobs/`+held[0].ID+`"`)

	// The job page: held by alice, with the lease's expiry.
	tb.waitText(`#live .state`, "active")
	worker := tb.text(`[data-field="worker"]`)
	if !strings.HasPrefix(worker, "held by "+alice+", lease expires in ") {
		t.Errorf("the job page says %q, want it held by alice with the lease's expiry", worker)
	}
	if title := eval[string](tb, `document.querySelector('[data-field="worker"] time').title`); !strings.HasSuffix(title, " UTC") {
		t.Errorf("the lease's expiry should carry the exact time on hover, got %q", title)
	}
	if tb.count("main i") != 0 {
		t.Error("a worker's name became markup on the job page")
	}
	tb.mark()
	b.ack(held[0])
	tb.waitText(`#live .state`, "completed")
	tb.waitText(`[data-field="worker"]`, "last run by "+alice)
	if !tb.marked() {
		t.Error("the job page reloaded; it should follow the job in place")
	}
	tb.click(`[data-field="worker"] a[data-worker]`)
	tb.waitFor("alice's entry", `location.pathname === "/ui/workers" && document.querySelector(".held") !== null`)
	if got := heldIDs(tb); len(got) != 1 || got[0] != held[1].ID {
		t.Errorf("alice holds %v after the ack, want only %s", got, held[1].ID)
	}
}

// TestWorkersLive: the workers page follows the workers without a
// reload: an ack drops the worker's count and takes the job off its
// entry, and a new worker shows up.
func TestWorkersLive(t *testing.T) {
	b := setup(t)
	for range 3 {
		b.enqueue(obj{"queue": "q", "kind": "k"})
	}
	held := b.fetchAs("q", "w1", 3)
	tb := b.open()
	tb.visit("/ui/workers?worker=w1")
	tb.waitText(workerRow("w1")+" [data-active]", "3")
	if got := len(heldIDs(tb)); got != 3 {
		t.Fatalf("w1's entry lists %d jobs, want 3", got)
	}
	tb.mark()
	b.ack(held[0])
	tb.waitText(workerRow("w1")+" [data-active]", "2")
	tb.waitFor("the acked job to leave the entry", `document.querySelectorAll(".held tr[data-job]").length === 2`)
	tb.waitText("[data-held-count]", "2 active jobs")
	b.enqueue(obj{"queue": "q", "kind": "k"})
	b.fetchAs("q", "w2", 1)
	tb.waitText(workerRow("w2")+" [data-active]", "1")
	if !tb.marked() {
		t.Error("the page reloaded; the update should have come without a reload")
	}
}

// TestWorkerHeldPages: a worker's entry lists the first 100 jobs it
// holds and pages on to the rest.
func TestWorkerHeldPages(t *testing.T) {
	b := setup(t)
	jobs := make([]obj, 105)
	for i := range jobs {
		jobs[i] = obj{"queue": "bulk", "kind": "k"}
	}
	b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
	if got := len(b.fetchAs("bulk", "big", 105)); got != 105 {
		t.Fatalf("fetched %d, want 105", got)
	}
	tb := b.open()
	tb.visit("/ui/workers?worker=big")
	if got := tb.text(workerRow("big") + " [data-active]"); got != "105" {
		t.Errorf("big's count = %q, want 105", got)
	}
	if got := len(heldIDs(tb)); got != 100 {
		t.Errorf("the first page lists %d jobs, want 100", got)
	}
	if tb.count("[data-more]") != 1 {
		t.Error("the first page should say there are more")
	}
	first := heldIDs(tb)
	tb.click(`.held .pager a[rel="next"]`)
	tb.waitFor("the second page", `document.querySelectorAll(".held tr[data-job]").length === 5`)
	for _, id := range heldIDs(tb) {
		if slices.Contains(first, id) {
			t.Errorf("%s is on both pages", id)
		}
	}
	if tb.count(`.held .pager a[rel="next"]`) != 0 || tb.count("[data-more]") != 0 {
		t.Error("the last page has no next page")
	}

	// A worker this node has not seen: its entry says so.
	tb.visit("/ui/workers?worker=" + url.QueryEscape("nobody"))
	if got := tb.text(".held .note"); !strings.Contains(got, "has not seen") {
		t.Errorf("an unknown worker's entry says %q", got)
	}
	if tb.count(".held .empty") != 1 {
		t.Error("an unknown worker holds nothing")
	}
}

// TestWorkersNeedEveryNamespace: as the API's GET /v1/workers, the
// workers page is refused (403) to a token limited to namespaces, which
// sees no nav item for it and no link from a job page; a read-only token
// of every namespace sees it.
func TestWorkersNeedEveryNamespace(t *testing.T) {
	b := setupAuth(t)
	id := b.enqueue(obj{"queue": "team-a", "kind": "k"})
	b.fetchAs("team-a", "team-worker", 1)

	tb := b.open()
	tb.login(teamSecret)
	tb.visit("/")
	if n := tb.count(`.top nav a[href="/ui/workers"]`); n != 0 {
		t.Error("a token limited to namespaces sees the Workers nav item")
	}
	for _, page := range []string{"/ui/workers", "/ui/workers?worker=team-worker"} {
		tb.visit(page)
		if got := tb.text("main h1"); !strings.HasPrefix(got, "403") {
			t.Errorf("%s with a token of team-: h1 = %q, want 403", page, got)
		}
		if strings.Contains(tb.text("main"), id) {
			t.Errorf("%s shows the held job to a token of team-", page)
		}
	}
	status := eval[int](tb, `fetch("/ui/workers?part=live", {headers: {"HX-Request": "true"}}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("the live part with a token of team-: status %d, want 403", status)
	}
	// Its own job names the worker, without a link to the refused page.
	tb.visit("/ui/jobs/" + id)
	if got := tb.text(`[data-field="worker"] [data-worker]`); got != "team-worker" {
		t.Errorf("the job page names %q, want team-worker", got)
	}
	if tb.count(`[data-field="worker"] a`) != 0 {
		t.Error("the job page links a token of team- to the workers page")
	}

	ro := b.open()
	ro.login(readOnlySecret)
	ro.visit("/ui/workers")
	if ro.count(`.top nav a[href="/ui/workers"]`) != 1 {
		t.Error("a read-only token of every namespace should see the Workers nav item")
	}
	if got := ro.text(workerRow("team-worker") + " [data-active]"); got != "1" {
		t.Errorf("team-worker's count for a read-only token = %q, want 1", got)
	}
}
