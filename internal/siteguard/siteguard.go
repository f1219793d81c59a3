// Package siteguard refuses, in front of every route of the server, the
// requests that a web page can make a user's browser send against the
// user's will:
//   - a request whose Host names a host the server does not serve under.
//     A page of a DNS name that its owner points at the server's address
//     (DNS rebinding) is same-origin with the server for the browser, which
//     then lets the page read the answers and send any request; the Host
//     header still carries the page's name, so the server answers only to
//     loopback names (localhost, *.localhost), IP addresses (a rebinding
//     needs a DNS name), the host of its listen address and the names an
//     operator allows.
//   - a cross-site request that changes something (cross-site request
//     forgery): a form or a no-cors fetch of another site can send a POST
//     with a text/plain body, which needs no preflight. The check is
//     net/http's CrossOriginProtection (Sec-Fetch-Site, else Origin
//     against Host), applied to the unsafe methods and to the GET routes
//     that change something (Options.ChangesOnGet).
//
// A request with neither Sec-Fetch-Site nor Origin is no browser's (curl,
// the SDKs, the stream transport) and passes the second check unchanged.
// The package knows no route and writes no answer itself: the server
// says which GETs change something and how a refusal is answered.
package siteguard

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Options configure a guard.
type Options struct {
	// AllowedHosts are the host names the server serves under besides the
	// defaults, in the form CheckHosts describes. Defaults to none.
	AllowedHosts []string
	// ListenHost is the host of the address the server listens on, which
	// is allowed too; an IP address or empty adds nothing.
	ListenHost string
	// ChangesOnGet reports whether a GET or HEAD of path changes
	// something, so that it is refused cross-site as a POST is. Nil: no
	// GET changes anything.
	ChangesOnGet func(path string) bool
	// Refuse answers a refused request; err is a *HostError or a
	// *CrossSiteError. It must be set.
	Refuse func(w http.ResponseWriter, r *http.Request, err error)
}

// HostError refuses a request whose Host the server does not serve under.
type HostError struct {
	// Host is the name the request gave, without its port, cut to a
	// bounded length.
	Host string
}

// Error names the host and the flag that allows it.
func (e *HostError) Error() string {
	return fmt.Sprintf("this server does not answer to the host %q: it answers to loopback names, IP addresses, the host it listens on "+
		"and the names of --allowed-hosts (env SPOOL_ALLOWED_HOSTS); start it with --allowed-hosts=%s if it is served under that name", e.Host, e.Host)
}

// CrossSiteError refuses a request that a page of another site made a
// browser send, to a route that changes something.
type CrossSiteError struct{}

// Error says why the request was refused.
func (*CrossSiteError) Error() string {
	return "a browser sent this request from a page of another site (Sec-Fetch-Site, Origin); calls that change something are refused from other sites, so nothing changed"
}

// maxHostEcho bounds the part of a refused Host that an answer repeats.
const maxHostEcho = 100

// guard is the handler New returns.
type guard struct {
	next         http.Handler
	hosts        hostSet
	changesOnGet func(string) bool
	refuse       func(http.ResponseWriter, *http.Request, error)
	origins      *http.CrossOriginProtection
}

// New returns next behind the guard. It fails when an allowed host is
// not in the form CheckHosts describes.
func New(next http.Handler, opts Options) (http.Handler, error) {
	if opts.Refuse == nil {
		panic("siteguard: Options.Refuse is nil")
	}
	hosts, err := parseHosts(opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if h := normalHost(opts.ListenHost); h != "" && !isIP(h) {
		hosts.exact[h] = true
	}
	return &guard{next: next, hosts: hosts, changesOnGet: opts.ChangesOnGet, refuse: opts.Refuse,
		origins: http.NewCrossOriginProtection()}, nil
}

// ServeHTTP refuses a foreign Host, then a cross-site change, and hands
// every other request to the next handler.
func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if host, ok := g.hosts.allows(r.Host); !ok {
		if len(host) > maxHostEcho {
			host = host[:maxHostEcho]
		}
		g.refuse(w, r, &HostError{Host: host})
		return
	}
	if g.crossSite(r) {
		g.refuse(w, r, &CrossSiteError{})
		return
	}
	g.next.ServeHTTP(w, r)
}

// crossSite reports whether r changes something and a page of another
// site made a browser send it.
func (g *guard) crossSite(r *http.Request) bool {
	check := r
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if g.changesOnGet == nil || !g.changesOnGet(r.URL.Path) {
			return false
		}
		// CrossOriginProtection lets every GET through; ask it about the
		// request as if it were a POST.
		check = r.WithContext(r.Context())
		check.Method = http.MethodPost
	}
	return g.origins.Check(check) != nil
}

// hostSet is the hosts a guard allows besides loopback names and IP
// addresses.
type hostSet struct {
	all     bool
	exact   map[string]bool
	domains []string // each allows itself and every name under it
}

// CheckHosts reports the first names that are not in the form of
// --allowed-hosts: a host name ("spool.example.com"), the same with a
// leading dot or "*." (".example.com", "*.example.com": example.com and
// every name under it), or "*" (every host). Names are matched without
// regard to case or port; a trailing dot is ignored.
func CheckHosts(names []string) error {
	_, err := parseHosts(names)
	return err
}

// parseHosts reads names in the form CheckHosts describes.
func parseHosts(names []string) (hostSet, error) {
	set := hostSet{exact: map[string]bool{}}
	var errs []error
	for _, raw := range names {
		name := strings.ToLower(strings.TrimSpace(raw))
		if name == "*" {
			set.all = true
			continue
		}
		domain := false
		if rest, ok := strings.CutPrefix(name, "*."); ok {
			name, domain = rest, true
		} else if rest, ok := strings.CutPrefix(name, "."); ok {
			name, domain = rest, true
		}
		name = strings.TrimSuffix(name, ".")
		if !validName(name) {
			errs = append(errs, fmt.Errorf("allowed host %q is not a host name, .name, *.name or * (no scheme, port or path)", raw))
			continue
		}
		if domain {
			set.domains = append(set.domains, name)
		} else {
			set.exact[name] = true
		}
	}
	return set, errors.Join(errs...)
}

// allows reports whether hostport, a request's Host, is allowed, and the
// host name it read from it.
func (s hostSet) allows(hostport string) (string, bool) {
	if hostport == "" {
		// HTTP/1.0 without Host: no browser sends that.
		return "", true
	}
	host, ok := splitHost(hostport)
	if !ok {
		return hostport, s.all
	}
	host = normalHost(host)
	switch {
	case s.all, isIP(host), host == "localhost", strings.HasSuffix(host, ".localhost"), s.exact[host]:
		return host, true
	}
	for _, d := range s.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return host, true
		}
	}
	return host, false
}

// splitHost is the host of a Host header: without its port, and without
// the brackets of an IPv6 address.
func splitHost(hostport string) (string, bool) {
	if rest, ok := strings.CutPrefix(hostport, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", false
		}
		after := rest[end+1:]
		if after != "" && !validPort(after) {
			return "", false
		}
		return rest[:end], true
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.Count(hostport, ":") == 1 {
		if !validPort(hostport[i:]) {
			return "", false
		}
		return hostport[:i], true
	}
	return hostport, true
}

// validPort reports whether s is ":" followed by digits (or nothing).
func validPort(s string) bool {
	if s == "" || s[0] != ':' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// normalHost is a host name in lower case without a trailing dot.
func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// isIP reports whether h is an IPv4 or IPv6 address literal.
func isIP(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}

// validName reports whether s is a host name of dot-separated labels of
// letters, digits, '-' and '_', or an IP address.
func validName(s string) bool {
	if isIP(s) {
		return true
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
