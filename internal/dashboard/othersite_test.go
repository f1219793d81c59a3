package dashboard_test

// Pages of other sites, in real Chromium: a page served from a second
// origin (127.0.0.2) that sends requests to the server, and a page of a
// DNS name that resolves to the server's address (DNS rebinding). The
// browser maps the names rebound and allowedName to 127.0.0.1 (see
// startBrowser).

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/spoolq/spool/internal/config"
)

const (
	// rebound is a name of another site that resolves to the server.
	rebound = "evil.example"
	// allowedName is a name the server is told to serve under.
	allowedName = "spool.example"
)

// port is the server's port, with its colon.
func (b *bundle) port() string { return b.base[strings.LastIndex(b.base, ":"):] }

// otherSite serves page (HTML) at / from 127.0.0.2, another site than
// the server's 127.0.0.1, and returns its URL.
func otherSite(t *testing.T, page string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// navigate loads url in the tab and waits until its document is loaded,
// whatever it is (the pages of these tests are not the dashboard's).
func (tb *tab) navigate(url string) {
	tb.t.Helper()
	tb.do("navigate to "+url, chromedp.Navigate(url))
	tb.waitFor("the page at "+url, `document.readyState === "complete"`)
}

// A page of another site that sends no-cors POSTs (text/plain bodies,
// which need no preflight) to the API, loads Queen's pop as an image and
// posts a form to a dashboard action changes nothing: each is refused.
func TestOtherSitePageChangesNothing(t *testing.T) {
	b := setup(t, func(c *config.Config) { c.QueenCompat = true })
	b.enqueue(obj{"queue": "emails", "kind": "k"})
	b.enqueue(obj{"queue": "emails", "kind": "k"})
	resp, err := http.Post(b.base+"/api/v1/push", "application/json", strings.NewReader(`{"items":[{"queue":"inbox","payload":{"n":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("push to inbox: status %d", resp.StatusCode)
	}

	spool := b.base
	page := otherSite(t, `<!doctype html><title>other site</title>
<form id="f" method="POST" action="`+spool+`/ui/queues/emails/purge"><input name="x" value="1"></form>
<script>
const send = (path, init) => fetch(`+jsString(spool)+` + path, Object.assign({method: "POST", mode: "no-cors"}, init)).then(() => "sent", e => "failed: " + e);
const image = src => new Promise(done => { const i = new Image(); i.onload = i.onerror = () => done("sent"); i.src = `+jsString(spool)+` + src; });
window.attack = Promise.all([
	send("/v1/queues/emails/purge", {}),
	send("/v1/queues/emails/pause", {}),
	send("/v1/jobs", {headers: {"Content-Type": "text/plain"}, body: JSON.stringify({queue: "emails", kind: "forged"})}),
	send("/api/v1/push", {headers: {"Content-Type": "text/plain"}, body: JSON.stringify({items: [{queue: "forged", payload: 1}]})}),
	image("/api/v1/pop/queue/inbox"),
]);
</script>`)
	tb := b.open()
	tb.navigate(page)
	sent := eval[[]string](tb, `window.attack`)
	for i, s := range sent {
		if s != "sent" {
			t.Fatalf("request %d of the page did not go out: %s", i, s)
		}
	}
	eval[bool](tb, `document.getElementById("f").submit(), true`)
	tb.waitFor("the form's answer", `location.origin === `+jsString(spool)+` && document.readyState === "complete"`)
	if got := eval[string](tb, `document.body.innerText`); !strings.Contains(got, `"forbidden"`) {
		t.Errorf("the form post to a dashboard action was answered %q, want the 403 forbidden error", got)
	}

	if got := b.counts("emails"); got["available"] != 2 {
		t.Errorf("emails after the other site's page: %v, want its 2 jobs available", got)
	}
	if q := b.must(200, "GET", "/v1/queues/emails", nil); q["paused"] != false {
		t.Error("the other site's page paused emails")
	}
	if got := b.counts("inbox"); got["available"] != 1 || got["active"] != 0 {
		t.Errorf("inbox after the other site's page: %v, want its message available", got)
	}
	if status, _ := b.call("GET", "/v1/queues/forged", nil); status != http.StatusNotFound {
		t.Errorf("the other site's push made queue forged: status %d", status)
	}
	// The server's own page still acts.
	tb.visit("/ui/queues/emails")
	if status := tb.post("/ui/queues/emails/pause"); status != http.StatusOK {
		t.Errorf("the dashboard's own pause: status %d, want 200", status)
	}
}

// A page of a DNS name that resolves to the server (rebinding) is, for the
// browser, of the server's origin: the server refuses its Host, so the
// page reads nothing and its same-origin actions change nothing. A name
// given to --allowed-hosts serves the dashboard, whose actions work.
func TestReboundNameIsRefused(t *testing.T) {
	b := setup(t)
	id := b.enqueue(obj{"queue": "q", "kind": "k", "payload": obj{"secret": "s3cr3t"}})
	origin := "http://" + rebound + b.port()
	tb := b.open()
	tb.navigate(origin + "/ui/queues/q")
	if got := eval[string](tb, `location.origin + " " + document.body.innerText`); !strings.Contains(got, "host_not_allowed") || tb.count("main") != 0 {
		t.Errorf("the dashboard under %s: %q, want the host_not_allowed error", origin, got)
	}
	read := eval[string](tb, `fetch("/v1/jobs/`+id+`").then(r => r.text().then(t => r.status + " " + t))`)
	if !strings.HasPrefix(read, "421 ") || strings.Contains(read, "s3cr3t") {
		t.Errorf("a same-origin read of the job under %s: %q, want 421 without the payload", origin, read)
	}
	if status := eval[int](tb, `fetch("/ui/queues/q/pause", {method: "POST", headers: {"HX-Request": "true"}}).then(r => r.status)`); status != http.StatusMisdirectedRequest {
		t.Errorf("a same-origin dashboard action under %s: status %d, want 421", origin, status)
	}
	if q := b.must(200, "GET", "/v1/queues/q", nil); q["paused"] != false {
		t.Error("the page of the rebound name paused q")
	}

	named := setup(t, func(c *config.Config) { c.AllowedHosts = []string{allowedName} })
	named.enqueue(obj{"queue": "q", "kind": "k"})
	nt := named.open()
	nt.navigate("http://" + allowedName + named.port() + "/ui/queues/q")
	if nt.count("main") != 1 {
		t.Fatalf("the dashboard under the allowed name: %q", eval[string](nt, `document.body.innerText`))
	}
	if status := nt.post("/ui/queues/q/pause"); status != http.StatusOK {
		t.Errorf("the dashboard's pause under the allowed name: status %d, want 200", status)
	}
	if q := named.must(200, "GET", "/v1/queues/q", nil); q["paused"] != true {
		t.Error("the dashboard's pause under the allowed name did not pause q")
	}
}
