package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/spoolq/spool/internal/httpapi/auth"
)

// maxTokenField bounds the token a login form may send.
const maxTokenField = 1024

// viewer is who looks at a page: the token's principal with auth on, nil
// (everything allowed) with auth off.
type viewer struct {
	p *auth.Principal
}

// AuthOn reports whether the viewer logged in with a token (auth is on).
func (v *viewer) AuthOn() bool { return v != nil && v.p != nil }

// Name is the token's name; empty with auth off.
func (v *viewer) Name() string {
	if !v.AuthOn() {
		return ""
	}
	return v.p.Name()
}

// Role is the token's role; empty with auth off.
func (v *viewer) Role() string {
	if !v.AuthOn() {
		return ""
	}
	return string(v.p.Role())
}

// CanManage reports whether the viewer may change things: the pages show
// their action buttons only then, and every action checks it again.
func (v *viewer) CanManage() bool { return !v.AuthOn() || v.p.Role().Allows(auth.PermManage) }

// Allows reports whether the viewer may see queue name.
func (v *viewer) Allows(name string) bool { return !v.AuthOn() || v.p.AllowsQueue(name) }

// SeesWorkers reports whether the viewer may see the workers page: a
// worker's name and the jobs it holds span every queue, so a token
// limited to namespaces may not, as the API refuses it GET /v1/workers.
// The nav shows the page, and the job page links its worker, only then.
func (v *viewer) SeesWorkers() bool { return !v.AuthOn() || !v.p.Limited() }

// allowFunc is Allows as a filter, nil when every queue passes.
func (v *viewer) allowFunc() func(string) bool {
	if !v.AuthOn() || !v.p.Limited() {
		return nil
	}
	return v.p.AllowsQueue
}

// handler is a dashboard handler told who calls.
type handler func(w http.ResponseWriter, r *http.Request, v *viewer)

// guard checks the caller before h. With auth on, a request without a
// valid token cookie goes to the login page (an htmx request is told to
// go there with HX-Redirect), and a token whose role lacks perm is
// refused (403). Every POST, auth on or off, must come from htmx on a
// page of this origin (see sameOrigin): a cross-site form cannot send the
// header, so an action cannot be forged.
func (d *Dashboard) guard(perm auth.Permission, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := &viewer{}
		if d.opts.Auth != nil {
			p, err := d.principal(r)
			if err != nil {
				d.fail(w, r, v, err)
				return
			}
			if p == nil {
				login := "/ui/login"
				if r.Method == http.MethodGet && !isHTMX(r) {
					login += "?next=" + url.QueryEscape(r.URL.RequestURI())
				}
				if isHTMX(r) {
					w.Header().Set("HX-Redirect", login)
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					http.Error(w, "log in first", http.StatusUnauthorized)
					return
				}
				http.Redirect(w, r, login, http.StatusSeeOther)
				return
			}
			v.p = p
			if !p.Role().Allows(perm) {
				d.message(w, r, v, http.StatusForbidden, "A "+string(p.Role())+" token may not do this.")
				return
			}
		}
		if r.Method == http.MethodPost && (!isHTMX(r) || !sameOrigin(r)) {
			d.message(w, r, v, http.StatusForbidden, "Actions must come from the dashboard's own pages.")
			return
		}
		h(w, r, v)
	}
}

// sameOrigin reports whether r comes from a page of this server: the
// browser's Sec-Fetch-Site says same-origin, or, from a browser without
// it, Origin names this host. A request with neither header is no
// browser's and has no cookie to abuse.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
	return true
}

// loginPage shows the form that asks for a token. With auth off there is
// nothing to log in to: it sends the caller to the overview.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if d.opts.Auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	d.render(w, r, http.StatusOK, "login", &loginPage{page: page{Title: "Log in"}, Next: safeNext(r.URL.Query().Get("next"))})
}

// login checks the token of the form and starts a session of it: the
// cookie holds the session's id, never the token.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.opts.Auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "log in from the dashboard's own page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4*maxTokenField)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if len(token) > maxTokenField {
		token = ""
	}
	p, err := d.opts.Auth.Authenticate("Bearer " + token)
	if token == "" || err != nil {
		d.render(w, r, http.StatusUnauthorized, "login", &loginPage{page: page{Title: "Log in"}, Next: next, Error: "That token is not valid."})
		return
	}
	value, err := d.startSession(r.Context(), p)
	if err != nil {
		d.fail(w, r, nil, err)
		return
	}
	d.setSessionCookie(w, r, value)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session on the server (on every node: the store holds
// it) and clears the cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "log out from the dashboard's own page", http.StatusForbidden)
		return
	}
	if err := d.endSession(r); err != nil {
		d.fail(w, r, nil, err)
		return
	}
	d.setSessionCookie(w, r, "")
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext is where a login sends the caller: next when it is a path of
// this dashboard, else the overview (never another site).
func safeNext(next string) string {
	if next == "/" || (strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "/ui/login")) {
		if u, err := url.Parse(next); err == nil && u.Host == "" && u.Scheme == "" {
			return next
		}
	}
	return "/"
}
