package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// dashboardSecret is the admin token of the session tests.
const dashboardSecret = "dash-admin-secret-0123456789"

func authWithDashboardToken(c *config.Config) {
	c.Auth, c.AuthTokens = true, config.Secret("ops admin * "+dashboardSecret)
}

// noRedirect is a client that shows redirects rather than following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// dashboardLogin logs in on the dashboard at b as its login form would
// and returns the session cookie's value.
func (b *bundle) dashboardLogin(secret string) string {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+"/ui/login", strings.NewReader(url.Values{"token": {secret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirect.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "spool_session" && c.Value != "" {
			if strings.Contains(c.Value, secret) {
				b.t.Fatal("the session cookie holds the token's secret")
			}
			return c.Value
		}
	}
	b.t.Fatalf("login: status %d, cookies %v: no session cookie", resp.StatusCode, resp.Cookies())
	return ""
}

// dashboardServes reports whether the dashboard at b serves its overview
// to the session cookie value (rather than sending it to log in).
func (b *bundle) dashboardServes(value string) bool {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.base+"/", nil)
	req.AddCookie(&http.Cookie{Name: "spool_session", Value: value})
	resp, err := noRedirect.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("GET / with a session cookie: status %d", resp.StatusCode)
	}
	return resp.StatusCode == http.StatusOK
}

// dashboardLogout logs the session of value out at b.
func (b *bundle) dashboardLogout(value string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+"/ui/logout", nil)
	req.AddCookie(&http.Cookie{Name: "spool_session", Value: value})
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirect.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("logout: status %d, want 303", resp.StatusCode)
	}
}

// A dashboard session lives in the store: behind a load balancer over
// two PostgreSQL nodes, a session made on one is valid on the other, and
// a logout on either ends it on both; on SQLite a logout ends it too.
func TestDashboardSessionsAcrossNodes(t *testing.T) {
	t.Parallel()
	for name, ns := range map[string]func(t *testing.T) []*bundle{
		"sqlite":   func(t *testing.T) []*bundle { b := setup(t, authWithDashboardToken); return []*bundle{b, b} },
		"postgres": func(t *testing.T) []*bundle { return nodes(t, 2, authWithDashboardToken) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := ns(t)
			a, b := n[0], n[1]
			made := a.dashboardLogin(dashboardSecret)
			kept := b.dashboardLogin(dashboardSecret)
			if !b.dashboardServes(made) || !a.dashboardServes(kept) {
				t.Fatal("a session made on one node is not valid on the other")
			}
			b.dashboardLogout(made)
			if a.dashboardServes(made) || b.dashboardServes(made) {
				t.Error("the cookie of a session logged out on B still opens the dashboard")
			}
			if !a.dashboardServes(kept) {
				t.Error("a logout ended another session of the same token")
			}
		})
	}
}
