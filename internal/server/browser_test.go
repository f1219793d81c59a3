package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// request is one raw HTTP request of the tests of this file: a body sent
// as given (text/plain unless the headers say otherwise), headers as a
// browser would send them, and a Host other than the server's address
// when host is set.
type request struct {
	method, path, body string
	header             map[string]string
	host               string
}

// send sends req and returns the status and the decoded JSON answer (nil
// when it is not a JSON object).
func (b *bundle) send(req request) (int, obj) {
	b.t.Helper()
	r, err := http.NewRequest(req.method, b.base+req.path, strings.NewReader(req.body))
	if err != nil {
		b.t.Fatal(err)
	}
	if req.body != "" {
		r.Header.Set("Content-Type", "text/plain")
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	if req.host != "" {
		r.Host = req.host
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	var out obj
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

// crossSite are the headers of a request a page of another site made a
// browser send.
var crossSite = map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}

// anyCode is the code of an error answer in Spool's shape or in Queen's.
func anyCode(out obj) string {
	if code := errorCode(out); code != "" {
		return code
	}
	code, _ := out["code"].(string)
	return code
}

// A request a page of another site made a browser send is refused on every
// route that changes something, the native API's, Queen's (its pop too,
// a GET that leases) and the dashboard's, and changes nothing; the same
// requests without a browser's headers, as curl and the SDKs send them,
// are served.
func TestCrossSiteRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, queenOn)
	b.enqueue(obj{"queue": "emails", "kind": "k"})
	b.enqueue(obj{"queue": "emails", "kind": "k"})
	b.queenMust(201, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "inbox", "payload": obj{"n": 1}}}})

	oldBrowser := map[string]string{"Origin": "http://evil.example"}
	sameSite := map[string]string{"Origin": "http://localhost:1", "Sec-Fetch-Site": "same-site"}
	htmx := func(h map[string]string) map[string]string {
		out := map[string]string{"HX-Request": "true"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	refused := []request{
		{method: "POST", path: "/v1/queues/emails/purge", header: crossSite},
		{method: "POST", path: "/v1/queues/emails/purge", header: oldBrowser},
		{method: "POST", path: "/v1/queues/emails/purge", header: sameSite},
		{method: "POST", path: "/v1/queues/emails/pause", header: crossSite},
		{method: "POST", path: "/v1/jobs", body: `{"queue":"emails","kind":"forged"}`, header: crossSite},
		{method: "POST", path: "/v1/jobs/batch", body: `{"jobs":[{"queue":"emails","kind":"forged"}]}`, header: crossSite},
		{method: "GET", path: "/api/v1/pop/queue/inbox", header: crossSite},
		{method: "GET", path: "/api/v1/pop/queue/inbox?consumerGroup=forged", header: crossSite},
		{method: "POST", path: "/api/v1/push", body: `{"items":[{"queue":"forged","payload":1}]}`, header: crossSite},
		{method: "POST", path: "/ui/queues/emails/pause", header: htmx(crossSite)},
		{method: "POST", path: "/ui/queues/emails/purge", header: htmx(crossSite)},
	}
	for _, req := range refused {
		status, out := b.send(req)
		if status != http.StatusForbidden || anyCode(out) != "forbidden" {
			t.Errorf("%s %s with %v: %d %v, want 403 forbidden", req.method, req.path, req.header, status, out)
		}
	}
	if got := b.counts("emails"); got["available"] != 2 {
		t.Errorf("emails after the refused requests: %v, want its 2 jobs available", got)
	}
	q := b.must(200, "GET", "/v1/queues/emails", nil)
	if q["paused"] != false {
		t.Error("a refused pause paused emails")
	}
	if got := b.counts("inbox"); got["available"] != 1 || got["active"] != 0 {
		t.Errorf("inbox after the refused pops: %v, want its message available", got)
	}
	if groups := objs(b.must(200, "GET", "/v1/queues/inbox/consumer-groups", nil)["consumer_groups"]); len(groups) != 0 {
		t.Errorf("a refused pop made consumer groups: %v", groups)
	}
	if status, out := b.call("GET", "/v1/queues/forged", nil); status != http.StatusNotFound {
		t.Errorf("a refused push made queue forged: %d %v", status, out)
	}

	// The same calls as curl and the SDKs send them, and from the
	// server's own pages, are served.
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "HX-Request": "true"}
	for _, c := range []struct {
		req  request
		want int
	}{
		{request{method: "POST", path: "/v1/jobs", body: `{"queue":"emails","kind":"k"}`}, http.StatusCreated},
		{request{method: "GET", path: "/api/v1/pop/queue/inbox"}, http.StatusOK},
		{request{method: "POST", path: "/api/v1/push", body: `{"items":[{"queue":"pushed","payload":1}]}`}, http.StatusCreated},
		{request{method: "POST", path: "/ui/queues/emails/pause", header: same}, http.StatusOK},
		{request{method: "POST", path: "/v1/queues/emails/resume", header: map[string]string{"Sec-Fetch-Site": "none"}}, http.StatusOK},
		{request{method: "POST", path: "/v1/queues/emails/purge"}, http.StatusOK},
	} {
		if status, out := b.send(c.req); status != c.want {
			t.Errorf("%s %s without a browser's cross-site headers: %d %v, want %d", c.req.method, c.req.path, status, out, c.want)
		}
	}
	if got := b.counts("emails"); got["available"] != 0 {
		t.Errorf("emails after its purge: %v, want no job available", got)
	}
	if got := b.counts("inbox"); got["active"] != 1 {
		t.Errorf("inbox after its pop: %v, want its message active", got)
	}
}

// A request whose Host names a host the server does not serve under (a
// page of a DNS name rebound to the server's address) is refused on every
// route, with a JSON error that names the flag to set, and changes
// nothing; loopback names and IP addresses are served.
func TestForeignHostRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "q", "kind": "k", "payload": obj{"secret": "s3cr3t"}})
	port := b.base[strings.LastIndex(b.base, ":"):]
	evil := "evil.example" + port

	same := map[string]string{"Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin", "HX-Request": "true"}
	for _, req := range []request{
		{method: "GET", path: "/v1/jobs/" + id, host: evil},
		{method: "GET", path: "/v1/jobs/" + id, host: "evil.example"},
		{method: "GET", path: "/v1/jobs/" + id, host: "localhost.evil.example" + port},
		{method: "POST", path: "/ui/queues/q/pause", host: evil, header: same},
		{method: "GET", path: "/", host: evil},
		{method: "GET", path: "/healthz", host: evil},
		{method: "GET", path: "/readyz", host: evil},
	} {
		status, out := b.send(req)
		e, _ := out["error"].(obj)
		msg, _ := e["message"].(string)
		if status != http.StatusMisdirectedRequest || errorCode(out) != "host_not_allowed" || !strings.Contains(msg, "--allowed-hosts") {
			t.Errorf("%s %s with Host %s: %d %v, want 421 host_not_allowed naming --allowed-hosts", req.method, req.path, req.host, status, out)
		}
		if strings.Contains(msg, "s3cr3t") {
			t.Errorf("the refusal shows the payload: %q", msg)
		}
	}
	if q := b.must(200, "GET", "/v1/queues/q", nil); q["paused"] != false {
		t.Error("a refused dashboard action paused q")
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LocalHost" + port, "app.localhost" + port, "localhost.", "[::1]" + port, "[::1]", "10.1.2.3"} {
		if status, out := b.send(request{method: "GET", path: "/v1/jobs/" + id, host: host}); status != http.StatusOK {
			t.Errorf("GET /v1/jobs/{id} with Host %s: %d %v, want 200", host, status, out)
		}
	}
}

// --allowed-hosts lets the names a deployment serves under through: a
// name, a domain with every name under it; other names stay refused. "*"
// lets every host through.
func TestAllowedHostsLetNamedHostsThrough(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.AllowedHosts = []string{"spool.example", ".corp.example"} })
	id := b.enqueue(obj{"queue": "q", "kind": "k"})
	port := b.base[strings.LastIndex(b.base, ":"):]
	for host, want := range map[string]int{
		"spool.example" + port:       http.StatusOK,
		"SPOOL.example":              http.StatusOK,
		"corp.example" + port:        http.StatusOK,
		"a.b.corp.example" + port:    http.StatusOK,
		"evil.example" + port:        http.StatusMisdirectedRequest,
		"x.spool.example" + port:     http.StatusMisdirectedRequest,
		"spool.example.evil" + port:  http.StatusMisdirectedRequest,
		"evilcorp.example" + port:    http.StatusMisdirectedRequest,
		"corp.example.evil.example.": http.StatusMisdirectedRequest,
	} {
		if status, out := b.send(request{method: "GET", path: "/v1/jobs/" + id, host: host}); status != want {
			t.Errorf("GET /v1/jobs/{id} with Host %s: %d %v, want %d", host, status, out, want)
		}
	}
	// A page of an allowed name is same-origin with its own actions.
	same := map[string]string{"Origin": "http://spool.example" + port, "Sec-Fetch-Site": "same-origin", "HX-Request": "true"}
	if status, _ := b.send(request{method: "POST", path: "/ui/queues/q/pause", host: "spool.example" + port, header: same}); status != http.StatusOK {
		t.Errorf("the dashboard's pause under an allowed name: %d, want 200", status)
	}

	every := setup(t, func(c *config.Config) { c.AllowedHosts = []string{"*"} })
	if status, out := every.send(request{method: "GET", path: "/healthz", host: "anything.example"}); status != http.StatusOK {
		t.Errorf("with * allowed, Host anything.example: %d %v, want 200", status, out)
	}
}

// Queen's routes answer a refusal in Queen's shape, with the catalog's
// code; a pop refused from another site leases nothing.
func TestQueenRefusalsInQueensShape(t *testing.T) {
	t.Parallel()
	b := setup(t, queenOn)
	port := b.base[strings.LastIndex(b.base, ":"):]
	status, out := b.send(request{method: "POST", path: "/api/v1/push", body: `{"items":[{"queue":"q","payload":1}]}`, host: "evil.example" + port})
	if msg, _ := out["error"].(string); status != http.StatusMisdirectedRequest || out["code"] != "host_not_allowed" || !strings.Contains(msg, "--allowed-hosts") {
		t.Errorf("a push with a foreign Host: %d %v, want 421 host_not_allowed in Queen's shape", status, out)
	}
	status, out = b.send(request{method: "GET", path: "/api/v1/pop/queue/q", header: crossSite})
	if _, isText := out["error"].(string); status != http.StatusForbidden || out["code"] != "forbidden" || !isText {
		t.Errorf("a cross-site pop: %d %v, want 403 forbidden in Queen's shape", status, out)
	}
}
