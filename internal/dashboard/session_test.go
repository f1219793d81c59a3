package dashboard_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/dashboard"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/server"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// cookies are the tab's cookies for the server.
func (tb *tab) cookies() []*network.Cookie {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.Action[network.GetCookiesResult](func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{tb.b.base + "/"}})
	}))
	if err != nil {
		tb.t.Fatalf("read cookies: %v", err)
	}
	return res.Cookies
}

// session is the session cookie of tb, failing the test
// when there is none.
func (tb *tab) session() *network.Cookie {
	tb.t.Helper()
	for _, c := range tb.cookies() {
		if c.Name == "spool_session" {
			return c
		}
	}
	tb.t.Fatalf("the tab has no spool_session cookie: %v", tb.cookies())
	return nil
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// loginAt logs in at base with secret as the login page's form would,
// and returns the answer's cookies.
func loginAt(t *testing.T, base, secret string) []*http.Cookie {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/ui/login", strings.NewReader(url.Values{"token": {secret}, "next": {"/"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	return resp.Cookies()
}

// sessionCookie is the session cookie among cookies, failing the test
// when there is none.
func sessionCookie(t *testing.T, cookies []*http.Cookie) *http.Cookie {
	t.Helper()
	for _, c := range cookies {
		if c.Name == "spool_session" && c.MaxAge >= 0 {
			return c
		}
	}
	t.Fatalf("the login set no spool_session cookie: %v", cookies)
	return nil
}

// servedWith reports whether GET path with the session cookie value is
// served (200), rather than sent to the login page.
func servedWith(t *testing.T, base, path, value string) bool {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "spool_session", Value: value})
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return true
	case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/ui/login"):
		return false
	}
	t.Fatalf("GET %s with a session cookie: status %d (Location %q)", path, resp.StatusCode, resp.Header.Get("Location"))
	return false
}

// A login sets a cookie that holds a random session id, not the token's
// secret: HttpOnly, SameSite=Strict, not Secure over plain HTTP. The
// session works; after a logout its cookie's value is refused.
func TestSessionCookieHoldsNoSecret(t *testing.T) {
	b := setupAuth(t)
	b.enqueue(obj{"queue": "q", "kind": "k"})
	tb := b.open()
	tb.login(adminSecret)
	for _, c := range tb.cookies() {
		if strings.Contains(c.Value, adminSecret) || strings.Contains(c.Value, url.QueryEscape(adminSecret)) {
			t.Errorf("cookie %s holds the token's secret", c.Name)
		}
	}
	c := tb.session()
	if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Secure || c.Path != "/" || len(c.Value) < 43 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over HTTP, Path=/, a 256-bit value", c)
	}
	if !servedWith(t, b.base, "/ui/queues/q", c.Value) {
		t.Fatal("the session's cookie does not open the queue page")
	}
	tb.visit("/ui/queues/q")
	tb.click(`.who button`)
	tb.waitFor("the login page", `location.pathname === "/ui/login" && document.readyState === "complete"`)
	if servedWith(t, b.base, "/ui/queues/q", c.Value) {
		t.Error("the cookie's value opens pages after the logout")
	}
	req, _ := http.NewRequest("POST", b.base+"/ui/queues/q/pause", nil)
	req.AddCookie(&http.Cookie{Name: "spool_session", Value: c.Value})
	req.Header.Set("HX-Request", "true")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an action with the cookie after the logout: status %d, want 401", resp.StatusCode)
	}
	if q := b.must(200, "GET", "/v1/queues/q", nil); q["paused"] != false {
		t.Error("an action with a logged-out cookie paused q")
	}
}

// The session cookie is Secure when the login came over HTTPS: on a TLS
// connection, or through a proxy of --trusted-proxies that says so in
// X-Forwarded-Proto; the header of any other peer is not believed.
func TestSessionCookieSecureOverHTTPS(t *testing.T) {
	tokens := config.Secret("ops admin * " + adminSecret)
	secure := func(cookies []*http.Cookie) bool { return sessionCookie(t, cookies).Secure }

	// A dashboard served over TLS.
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	au, err := auth.New([]auth.Token{{Name: "ops", Role: auth.RoleAdmin, Secret: adminSecret}})
	if err != nil {
		t.Fatal(err)
	}
	dash := dashboard.New(engine.New(st, engine.Config{}), dashboard.Options{Auth: au, Sessions: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	direct := httptest.NewTLSServer(dash)
	t.Cleanup(direct.Close)
	noRedirects.Transport = direct.Client().Transport
	if !secure(loginAt(t, direct.URL, adminSecret)) {
		t.Error("a login over TLS got a cookie that is not Secure")
	}
	noRedirects.Transport = nil

	// A server behind a TLS proxy on 127.0.0.1, which sets
	// X-Forwarded-Proto: https.
	behindProxy := func(trusted ...netip.Prefix) string {
		b := setup(t, func(c *config.Config) { c.Auth, c.AuthTokens, c.TrustedProxies = true, tokens, trusted })
		target, _ := url.Parse(b.base)
		proxy := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.SetXForwarded()
		}})
		t.Cleanup(proxy.Close)
		return proxy.URL
	}
	proxyClient := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: noRedirects.CheckRedirect,
	}
	loginVia := func(base string) []*http.Cookie {
		t.Helper()
		saved := noRedirects.Transport
		noRedirects.Transport = proxyClient.Transport
		defer func() { noRedirects.Transport = saved }()
		return loginAt(t, base, adminSecret)
	}
	if !secure(loginVia(behindProxy(netip.MustParsePrefix("127.0.0.1/32")))) {
		t.Error("a login through a trusted HTTPS proxy got a cookie that is not Secure")
	}
	if secure(loginVia(behindProxy())) {
		t.Error("a login through a proxy not listed in --trusted-proxies got a Secure cookie")
	}
	if secure(loginVia(behindProxy(netip.MustParsePrefix("10.0.0.0/8")))) {
		t.Error("a login from a peer outside --trusted-proxies got a Secure cookie")
	}

	// A client that sends X-Forwarded-Proto itself, straight to a server
	// that trusts other proxies, is not believed.
	b := setup(t, func(c *config.Config) {
		c.Auth, c.AuthTokens, c.TrustedProxies = true, tokens, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	req, _ := http.NewRequest("POST", b.base+"/ui/login", strings.NewReader(url.Values{"token": {adminSecret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if secure(resp.Cookies()) {
		t.Error("a client's own X-Forwarded-Proto made the cookie Secure")
	}
}

// A token removed from the config, or whose secret changed, ends its
// sessions: a restart with the new config refuses their cookies, while
// the sessions of the tokens left as they were go on.
func TestChangedTokenEndsItsSessions(t *testing.T) {
	data := t.TempDir()
	run := func(tokens string) (base string, stop func()) {
		t.Helper()
		cfg := config.Default()
		cfg.Addr, cfg.Data, cfg.Auth, cfg.AuthTokens = "127.0.0.1:0", data, true, config.Secret(tokens)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err := srv.Start(context.Background()); err != nil {
			t.Fatalf("start server: %v", err)
		}
		return "http://" + srv.Addr(), func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Stop(ctx); err != nil {
				t.Errorf("stop server: %v", err)
			}
		}
	}
	ops, viewer, team := "ops admin * "+adminSecret, "viewer read-only * "+readOnlySecret, "team admin team- "+teamSecret
	base, stop := run(ops + "\n" + viewer + "\n" + team)
	opsCookie := sessionCookie(t, loginAt(t, base, adminSecret)).Value
	viewerCookie := sessionCookie(t, loginAt(t, base, readOnlySecret)).Value
	teamCookie := sessionCookie(t, loginAt(t, base, teamSecret)).Value
	for _, v := range []string{opsCookie, viewerCookie, teamCookie} {
		if !servedWith(t, base, "/", v) {
			t.Fatal("a fresh session was refused")
		}
	}
	stop()

	// viewer removed, team's secret changed, ops as it was.
	base, stop = run(ops + "\nteam admin team- " + teamSecret + "-rotated")
	defer stop()
	if !servedWith(t, base, "/", opsCookie) {
		t.Error("the session of an unchanged token ended with the restart")
	}
	if servedWith(t, base, "/", viewerCookie) {
		t.Error("the session of a removed token goes on")
	}
	if servedWith(t, base, "/", teamCookie) {
		t.Error("the session of a token whose secret changed goes on")
	}
}

// A token has at most dashboard.MaxSessionsPerToken live sessions: a
// login beyond them ends the oldest.
func TestSessionCapPerToken(t *testing.T) {
	b := setupAuth(t)
	var values []string
	for range dashboard.MaxSessionsPerToken + 1 {
		values = append(values, sessionCookie(t, loginAt(t, b.base, adminSecret)).Value)
	}
	other := sessionCookie(t, loginAt(t, b.base, readOnlySecret)).Value
	if servedWith(t, b.base, "/", values[0]) {
		t.Errorf("the oldest of %d sessions of one token goes on", len(values))
	}
	for i, v := range values[1:] {
		if !servedWith(t, b.base, "/", v) {
			t.Errorf("session %d of the newest %d ended", i+1, dashboard.MaxSessionsPerToken)
		}
	}
	if !servedWith(t, b.base, "/", other) {
		t.Error("another token's session ended")
	}
}
