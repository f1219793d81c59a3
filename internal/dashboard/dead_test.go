package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
)

// alphaSecret is the secret of a token limited to the namespace a.
const alphaSecret = "alpha-secret-0123456789"

// killMany makes n dead jobs spread over queues, with message as their
// last error: one batch enqueue of jobs of one attempt, then fetches
// and batch fails of up to 1,000 jobs at a time.
func (b *bundle) killMany(queues []string, n int, message string) {
	b.t.Helper()
	jobs := make([]obj, n)
	for i := range jobs {
		jobs[i] = obj{"queue": queues[i%len(queues)], "kind": "work", "max_attempts": 1}
	}
	if status, _ := b.call("POST", "/v1/jobs/batch", obj{"jobs": jobs}); status != http.StatusOK {
		b.t.Fatalf("batch enqueue: status %d", status)
	}
	killed := 0
	for _, q := range queues {
		for {
			got := b.fetch(q, 1000)
			if len(got) == 0 {
				break
			}
			items := make([]obj, len(got))
			for i, j := range got {
				items[i] = obj{"id": j.ID, "token": j.Token, "error": message}
			}
			if status, _ := b.call("POST", "/v1/jobs/fail", obj{"items": items}); status != http.StatusOK {
				b.t.Fatalf("fail %d jobs: status %d", len(items), status)
			}
			killed += len(got)
		}
	}
	if killed != n {
		b.t.Fatalf("killed %d jobs, want %d", killed, n)
	}
}

// TestDeadLettersOfNamespaces: a token limited to namespaces sees the dead
// jobs of its queues on the dead letters page however many dead jobs of
// other queues came before them, and its retry of an error's jobs retries exactly
// those; a token of every namespace pages through every dead job, a
// window of them at a time. On both stores.
func TestDeadLettersOfNamespaces(t *testing.T) {
	for name, db := range map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return pgtest.Schema(t) },
	} {
		t.Run(name, func(t *testing.T) {
			dsn := db(t)
			b := setup(t, func(c *config.Config) {
				c.DB = dsn
				c.Auth = true
				c.AuthTokens = config.Secret("ops admin * " + adminSecret + "\nalpha admin a. " + alphaSecret)
			})
			b.token = adminSecret
			b.killMany([]string{"b.mail", "b.sms", "b.push"}, 5100, "provider down")
			var mine []string
			for range 3 {
				mine = append(mine, b.kill("a.dead", "quota exceeded", obj{}))
			}
			testDeadLettersOfNamespaces(t, b, mine)
		})
	}
}

func testDeadLettersOfNamespaces(t *testing.T, b *bundle, mine []string) {
	// The namespace a.: its three jobs, nothing of b.
	alpha := b.open()
	alpha.login(alphaSecret)
	alpha.visit("/ui/dead")
	if n := alpha.count("tr[data-error]"); n != 1 {
		t.Fatalf("errors = %d, want 1: %s", n, alpha.text("main"))
	}
	if got := alpha.text(`tr[data-error] [data-count]`); got != "3" {
		t.Errorf("the error has %q jobs, want 3", got)
	}
	if got := alpha.text(`tr[data-error] td:nth-child(3)`); got != "a.dead" {
		t.Errorf("the error's queues = %q, want a.dead", got)
	}
	if strings.Contains(alpha.text("main"), "b.") || alpha.count("[data-bounded]") != 0 {
		t.Errorf("the page shows or counts another namespace's jobs: %s", alpha.text("main"))
	}

	// Every namespace: the first window of 5,000, then the rest.
	ops := b.open()
	ops.login(adminSecret)
	ops.visit("/ui/dead")
	if got := ops.text(`tr[data-error] [data-count]`); got != "5,000" {
		t.Errorf("the first window's error has %q jobs, want 5,000", got)
	}
	if ops.count("[data-bounded]") != 1 {
		t.Error("the first window does not say there are more")
	}
	ops.click(`a[data-next]`)
	ops.waitFor("the next window", `document.querySelectorAll("tr[data-error]").length === 2`)
	counts := eval[[]string](ops, `Array.from(document.querySelectorAll("tr[data-error] [data-count]")).map(e => e.textContent)`)
	if fmt.Sprint(counts) != "[100 3]" {
		t.Errorf("the next window's errors have %v jobs, want [100 3]", counts)
	}

	// a.'s retry of its error's jobs retries its three jobs.
	alpha.click(`button[data-action="retry-error"]`)
	alpha.waitFor("the flash", `document.querySelector("#flash").textContent.includes("Retried 3 dead jobs")`)
	alpha.waitFor("the error to leave", `document.querySelectorAll("tr[data-error]").length === 0`)
	for _, id := range mine {
		if got := b.state(id); got != "available" {
			t.Errorf("job %s with the error is %s after the retry, want available", id, got)
		}
	}
	dead := 0
	for _, q := range []string{"b.mail", "b.sms", "b.push"} {
		dead += b.counts(q)["dead"]
	}
	if dead != 5100 {
		t.Errorf("%d jobs dead in b.* after a.'s retry, want 5,100", dead)
	}
	// A retry of an error's jobs outside the namespace retries nothing.
	key := eval[string](ops, `document.querySelector("tr[data-error] input[name=error]").value`)
	status := eval[int](alpha, `fetch("/ui/dead/retry", {method: "POST", headers: {"HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"}, body: "error=`+key+`"}).then(r => r.status)`)
	if status != http.StatusOK {
		t.Errorf("a retry of another namespace's error: status %d", status)
	}
	if got := b.counts("b.mail")["dead"]; got != 1700 {
		t.Errorf("b.mail has %d dead jobs after a.'s retry of b.'s error, want 1,700", got)
	}
}
