package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// Secrets of the tokens of the auth tests.
const (
	adminSecret    = "admin-secret-0123456789"
	readOnlySecret = "readonly-secret-0123456789"
	teamSecret     = "team-secret-0123456789"
)

// setupAuth starts a server with auth on and three tokens: ops (admin),
// viewer (read-only) and team (admin of the queues named team-…). The
// bundle's API calls use ops.
func setupAuth(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, func(c *config.Config) {
		c.Auth = true
		c.AuthTokens = config.Secret("ops admin * " + adminSecret + "\nviewer read-only * " + readOnlySecret + "\nteam admin team- " + teamSecret)
	})
	b.token = adminSecret
	return b
}

// login logs the tab in with secret on the login page, and waits for the
// page it goes to.
func (tb *tab) login(secret string) {
	tb.t.Helper()
	tb.visit("/ui/login")
	tb.do("log in", sendKeys(`input[name="token"]`, secret), submit(`.login form`))
	tb.waitFor("the page after the login", `location.pathname !== "/ui/login" && document.readyState === "complete"`)
}

// post sends an action from the page, as htmx would, and returns the
// status.
func (tb *tab) post(path string) int {
	tb.t.Helper()
	return eval[int](tb, `fetch(`+jsString(path)+`, {method: "POST", headers: {"HX-Request": "true"}}).then(r => r.status)`)
}

func jsString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// TestLogin: with auth on, the pages ask for a token, start a session
// kept in an HttpOnly cookie, and logging out ends it.
func TestLogin(t *testing.T) {
	b := setupAuth(t)
	b.enqueue(obj{"queue": "q", "kind": "k"})
	tb := b.open()
	tb.visit("/ui/queues/q")
	if got := eval[string](tb, `location.pathname`); got != "/ui/login" {
		t.Fatalf("without a token the page went to %s, want the login page", got)
	}
	// A wrong token is refused.
	tb.do("log in wrong", sendKeys(`input[name="token"]`, "not-a-valid-token-at-all"), submit(`.login form`))
	tb.waitFor("the refusal", `document.querySelector(".login .flash.bad") !== null`)

	// The right one goes to the page asked for first.
	tb.visit("/ui/login?next=" + url.QueryEscape("/ui/queues/q"))
	tb.do("log in", sendKeys(`input[name="token"]`, adminSecret), submit(`.login form`))
	tb.waitFor("the queue page", `location.pathname === "/ui/queues/q" && document.readyState === "complete"`)
	if got := tb.text(".who"); !strings.Contains(got, "ops") || !strings.Contains(got, "admin") {
		t.Errorf("the header shows %q, want the token ops and its role", got)
	}
	if eval[string](tb, `document.cookie`) != "" {
		t.Error("the session cookie is readable from scripts; it must be HttpOnly")
	}
	if tb.count(`button[data-action="pause"]`) != 1 {
		t.Error("an admin token should see the actions")
	}

	// A request the browser did not send from the page: no cookie, so
	// the login page (the API's own routes answer 401 JSON).
	resp, err := http.Get(b.base + "/ui/queues/q")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/login" {
		t.Errorf("a request without the cookie ended at %s, want the login page", resp.Request.URL.Path)
	}

	tb.click(`.who button`)
	tb.waitFor("the login page", `location.pathname === "/ui/login" && document.readyState === "complete"`)
	tb.visit("/")
	if got := eval[string](tb, `location.pathname`); got != "/ui/login" {
		t.Errorf("after logging out / went to %s, want the login page", got)
	}
}

// TestReadOnlyToken: a token without the manage permission sees no button
// that changes anything, and an action it sends anyway is refused (403)
// and changes nothing.
func TestReadOnlyToken(t *testing.T) {
	b := setupAuth(t)
	dead := b.kill("q", "boom", obj{})
	tb := b.open()
	tb.login(readOnlySecret)
	for _, page := range []string{"/", "/ui/queues/q", "/ui/jobs/" + dead, "/ui/dead", "/ui/workers"} {
		tb.visit(page)
		if tb.count("main h1") == 0 || strings.HasPrefix(tb.text("main h1"), "40") {
			t.Errorf("%s: a read-only token should see the page, got %q", page, tb.text("main"))
		}
		if n := tb.count("[data-action], [hx-post]"); n != 0 {
			t.Errorf("%s: a read-only token sees %d action buttons", page, n)
		}
	}
	for _, path := range []string{"/ui/queues/q/pause", "/ui/queues/q/purge", "/ui/queues/q/retry-dead", "/ui/jobs/" + dead + "/retry", "/ui/jobs/" + dead + "/delete"} {
		if status := tb.post(path); status != http.StatusForbidden {
			t.Errorf("POST %s with a read-only token: status %d, want 403", path, status)
		}
	}
	if got := b.state(dead); got != "dead" {
		t.Errorf("the dead job is %s after refused actions", got)
	}
	if paused := b.must(200, "GET", "/v1/queues/q", nil)["paused"]; paused != false {
		t.Error("a refused pause paused the queue")
	}
}

// TestActionsNeedTheirPage: an action without the htmx header (a plain
// cross-site form could send that) or from another site is refused, even
// with a valid token.
func TestActionsNeedTheirPage(t *testing.T) {
	b := setupAuth(t)
	b.enqueue(obj{"queue": "q", "kind": "k"})
	tb := b.open()
	tb.login(adminSecret)
	tb.visit("/ui/queues/q")
	status := eval[int](tb, `fetch("/ui/queues/q/pause", {method: "POST"}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("a POST without the htmx header: status %d, want 403", status)
	}
	// The cookie is SameSite=Strict and the check holds without it too:
	// a request with the cookie and the header from another origin.
	req, _ := http.NewRequest("POST", b.base+"/ui/queues/q/pause", nil)
	req.AddCookie(&http.Cookie{Name: "spool_session", Value: tb.session().Value})
	req.Header.Set("HX-Request", "true")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST from another origin: status %d, want 403", resp.StatusCode)
	}
	if paused := b.must(200, "GET", "/v1/queues/q", nil)["paused"]; paused != false {
		t.Error("a refused pause paused the queue")
	}
	if status := tb.post("/ui/queues/q/pause"); status != http.StatusOK {
		t.Errorf("the page's own pause: status %d, want 200", status)
	}
}

// TestNamespacedToken: a token limited to namespaces sees only its
// queues, their jobs and their dead letters; a job or queue outside is
// answered as a missing one, and its actions too.
func TestNamespacedToken(t *testing.T) {
	b := setupAuth(t)
	b.enqueue(obj{"queue": "team-a", "kind": "k"})
	b.complete("team-a", 1)
	b.enqueue(obj{"queue": "team-a", "kind": "k"})
	secret := b.enqueue(obj{"queue": "payroll", "kind": "k", "payload": obj{"salary": 1}})
	b.complete("payroll", 1)
	b.kill("team-a", "team error", obj{})
	hidden := b.kill("payroll", "payroll error", obj{})

	tb := b.open()
	tb.login(teamSecret)
	tb.visit("/")
	queues := eval[[]string](tb, `Array.from(document.querySelectorAll("tr[data-queue]")).map(r => r.dataset.queue)`)
	if len(queues) != 1 || queues[0] != "team-a" {
		t.Errorf("the overview lists %v, want only team-a", queues)
	}
	if got := tb.text(`[data-total="completed"]`); got != "1" {
		t.Errorf("total completed = %q, want 1 (team-a's only)", got)
	}
	sums := eval[[]int](tb, `fetch('/ui/throughput.json').then(r => r.json()).then(j => [j.completed.reduce((a, b) => a + b, 0), j.failed.reduce((a, b) => a + b, 0)])`)
	if sums[0] != 1 || sums[1] != 1 {
		t.Errorf("the chart counts (completed, failed) = %v, want team-a's [1 1]", sums)
	}
	if n := eval[int](tb, `fetch('/ui/throughput.json?queue=payroll').then(r => r.json()).then(j => j.completed.reduce((a, b) => a + b, 0))`); n != 0 {
		t.Errorf("the chart of payroll counts %d for a token of team-", n)
	}
	for _, page := range []string{"/ui/queues/payroll", "/ui/jobs/" + secret, "/ui/jobs/" + hidden, "/ui/jobs/no-such-job"} {
		tb.visit(page)
		if got := tb.text("main h1"); !strings.HasPrefix(got, "404") {
			t.Errorf("%s: h1 = %q, want 404", page, got)
		}
		if strings.Contains(tb.text("main"), "salary") {
			t.Errorf("%s shows the payload of another namespace", page)
		}
	}
	tb.visit("/ui/dead")
	if got := tb.text("main"); !strings.Contains(got, "team error") || strings.Contains(got, "payroll error") {
		t.Errorf("dead letters: %q, want team-a's error only", got)
	}
	for _, path := range []string{"/ui/queues/payroll/pause", "/ui/jobs/" + hidden + "/retry", "/ui/jobs/" + secret + "/delete"} {
		if status := tb.post(path); status != http.StatusNotFound {
			t.Errorf("POST %s with a token of team-: status %d, want 404", path, status)
		}
	}
	if got := b.state(hidden); got != "dead" {
		t.Errorf("payroll's dead job is %s; the token of team- must not retry it", got)
	}
	if status := tb.post("/ui/queues/team-a/pause"); status != http.StatusOK {
		t.Errorf("pausing its own queue: status %d, want 200", status)
	}
}
