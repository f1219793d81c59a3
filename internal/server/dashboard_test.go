package server

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/dashboard"
)

// TestDashboardShadowsNoRoute: the dashboard takes / and /ui/ only; every
// route of the API, the health checks and /metrics still reach the API.
func TestDashboardShadowsNoRoute(t *testing.T) {
	b := setup(t, func(c *config.Config) { c.QueenCompat = true })
	wildcard := regexp.MustCompile(`\{[^}]+\}`)
	for _, rt := range b.srv.api.Routes() {
		path := wildcard.ReplaceAllString(rt.Pattern, "x")
		if dashboard.Serves(path) {
			t.Errorf("the dashboard would take %s %s", rt.Method, rt.Pattern)
		}
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/v1", "/v1/", "/health", "/api/v1/configure", "/ui", "/ui/../v1/queues", "/ui//x"} {
		if dashboard.Serves(path) {
			t.Errorf("the dashboard would take %s", path)
		}
	}
	for path, want := range map[string]string{"/": "text/html", "/ui/dead": "text/html", "/healthz": "application/json", "/v1/queues": "application/json", "/nope": "application/json"} {
		resp, err := http.Get(b.base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, want)
		}
	}
}
