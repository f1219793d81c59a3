package siteguard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// serve runs one request through a guard and returns the error it was
// refused with (nil when it was served).
func serve(t *testing.T, opts Options, r *http.Request) error {
	t.Helper()
	var refused error
	opts.Refuse = func(w http.ResponseWriter, _ *http.Request, err error) {
		refused = err
		w.WriteHeader(http.StatusForbidden)
	}
	served := false
	h, err := New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }), opts)
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	if served == (refused != nil) {
		t.Fatalf("%s %s (Host %s): served %v, refused with %v", r.Method, r.URL, r.Host, served, refused)
	}
	return refused
}

func TestHosts(t *testing.T) {
	t.Parallel()
	opts := Options{AllowedHosts: []string{"spool.example.com", ".corp.example", "*.Apps.Example.", "10.9.9.9"}, ListenHost: "Box.lan"}
	for host, want := range map[string]bool{
		"":                          true,
		"127.0.0.1:7311":            true,
		"127.0.0.1":                 true,
		"10.1.2.3:80":               true,
		"[::1]:7311":                true,
		"[::1]":                     true,
		"::1":                       true,
		"[fe80::1%25eth0]:1":        true,
		"localhost:7311":            true,
		"LOCALHOST":                 true,
		"localhost.":                true,
		"a.b.localhost:1":           true,
		"box.lan:7311":              true,
		"spool.example.com":         true,
		"SPOOL.example.com.:443":    true,
		"corp.example":              true,
		"x.corp.example":            true,
		"x.y.corp.example:1":        true,
		"apps.example":              true,
		"a.apps.example":            true,
		"evil.example:7311":         false,
		"evil.example":              false,
		"localhost.evil.example":    false,
		"evilcorp.example":          false,
		"x.spool.example.com":       false,
		"box.lan.evil.example":      false,
		"127.0.0.1.nip.io":          false,
		"evil.example:7311:1":       false,
		"[::1":                      false,
		"[::1]x":                    false,
		"localhost:abc":             false,
		"notlocalhost":              false,
		"127.0.0.1.evil.example:80": false,
	} {
		r := httptest.NewRequest("GET", "/v1/jobs/x", nil)
		r.Host = host
		err := serve(t, opts, r)
		var he *HostError
		if got := err == nil; got != want || (err != nil && !errors.As(err, &he)) {
			t.Errorf("Host %q: refused with %v, want allowed %v", host, err, want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example:1"
	if err := serve(t, Options{AllowedHosts: []string{"*"}}, r); err != nil {
		t.Errorf("with * allowed: %v", err)
	}
}

func TestCheckHosts(t *testing.T) {
	t.Parallel()
	if err := CheckHosts([]string{"a.example", ".b.example", "*.c.example", "*", "127.0.0.1", "under_score.example"}); err != nil {
		t.Errorf("valid names refused: %v", err)
	}
	for _, bad := range []string{"", "http://a.example", "a.example:80", "a.example/x", "*a.example", "a.*.example", "a..example", "a b", "*.", "."} {
		if err := CheckHosts([]string{bad}); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestCrossSite(t *testing.T) {
	t.Parallel()
	opts := Options{ChangesOnGet: func(p string) bool { return p == "/pop" }}
	for _, c := range []struct {
		method, path string
		header       map[string]string
		refused      bool
	}{
		{"POST", "/purge", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, true},
		{"POST", "/purge", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"POST", "/purge", map[string]string{"Origin": "http://evil.example"}, true},
		{"POST", "/purge", map[string]string{"Origin": "null"}, true},
		{"DELETE", "/job", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"PUT", "/limits", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"GET", "/pop", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"HEAD", "/pop", map[string]string{"Origin": "http://evil.example"}, true},
		{"POST", "/purge", nil, false},
		{"GET", "/pop", nil, false},
		{"POST", "/purge", map[string]string{"Sec-Fetch-Site": "same-origin"}, false},
		{"POST", "/purge", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"POST", "/purge", map[string]string{"Origin": "http://127.0.0.1:7311"}, false},
		{"GET", "/pop", map[string]string{"Sec-Fetch-Site": "same-origin"}, false},
		{"GET", "/queue", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		r.Host = "127.0.0.1:7311"
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		err := serve(t, opts, r)
		var ce *CrossSiteError
		if (err != nil) != c.refused || (err != nil && !errors.As(err, &ce)) {
			t.Errorf("%s %s %v: refused with %v, want refused %v", c.method, c.path, c.header, err, c.refused)
		}
		if r.Method != c.method {
			t.Errorf("the guard changed the request's method to %s", r.Method)
		}
	}
}

// A foreign Host is refused before anything else, and the answer repeats
// a bounded part of it.
func TestHostEchoIsBounded(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/purge", nil)
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'a'
	}
	r.Host = string(long) + ".example"
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	err := serve(t, Options{}, r)
	var he *HostError
	if !errors.As(err, &he) || len(he.Host) > maxHostEcho {
		t.Fatalf("refused with %v, want a HostError of at most %d bytes", err, maxHostEcho)
	}
}
