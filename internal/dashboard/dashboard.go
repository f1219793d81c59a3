// Package dashboard is Spool's web UI, served by `spool server` at / and
// under /ui/: an overview of every queue with a live throughput chart, a
// page per queue, per job, for dead letters and for the workers (with the
// jobs each holds), with the actions an
// operator takes (pause, purge, retry, cancel, delete). Pages are rendered
// on the server with html/template and updated in place by htmx polling
// small fragments; the chart is uPlot fed by a JSON endpoint. Both
// libraries are vendored under static/vendor and every file is embedded in
// the binary.
//
// The dashboard reads and acts through the engine (*engine.Engine) only,
// never the store, and bounds what each page reads: one page of jobs, or
// a scan of at most maxScan jobs for a filter. Throughput comes from a
// sampler subscribed to the engine's event bus, kept in memory per second
// for the last ten minutes. With auth on, a token given on the login page
// starts a session kept in the store (see login.go), whose id an HttpOnly,
// SameSite=Strict cookie holds, and every page and action checks the
// token's role and namespaces as the API would.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

// Options configure the dashboard.
type Options struct {
	// Auth, when not nil, requires a token (given on the login page) of a
	// role with the read permission on every page, and the manage
	// permission for every action. Defaults to nil: no auth.
	Auth *auth.Authenticator
	// Sessions keeps the login sessions; it must be set when Auth is. The
	// store of a server shared by several nodes makes a session made on
	// one valid on all, and a logout on one end it on all.
	Sessions session.Store
	// MaxSessionsPerToken bounds the live sessions of one token. Defaults
	// to MaxSessionsPerToken.
	MaxSessionsPerToken int
	// TrustedProxies are the reverse proxies whose X-Forwarded-Proto is
	// believed: a login over HTTPS, directly or through one of them, gets
	// a Secure cookie. Defaults to none.
	TrustedProxies []netip.Prefix
	// Logger receives internal errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// Dashboard is the web UI's HTTP handler. Start its sampler with Start;
// Stop ends it.
type Dashboard struct {
	engine  *engine.Engine
	opts    Options
	mux     *http.ServeMux
	pages   *pages
	sampler *sampler

	startMu sync.Mutex
	started bool
}

// New returns the dashboard on e.
func New(e *engine.Engine, opts Options) *Dashboard {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Auth != nil && opts.Sessions == nil {
		panic("dashboard: Options.Sessions is nil with auth on")
	}
	if opts.MaxSessionsPerToken <= 0 {
		opts.MaxSessionsPerToken = MaxSessionsPerToken
	}
	d := &Dashboard{engine: e, opts: opts, mux: http.NewServeMux(), pages: loadPages(e.Now), sampler: newSampler(e.Events(), opts.Logger)}
	d.register()
	return d
}

// Serves reports whether p is the dashboard's: / and every path under
// /ui/ in canonical form. Every other path (the API's /v1/..., /healthz,
// /readyz, /metrics, and paths with empty, . or .. segments, which the
// API answers 404) is left to the API.
func Serves(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/ui/") {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") {
		clean += "/"
	}
	return clean == p
}

// Start starts the throughput sampler. It returns at once.
func (d *Dashboard) Start() {
	d.startMu.Lock()
	defer d.startMu.Unlock()
	if !d.started {
		d.started = true
		d.sampler.start()
	}
}

// Stop stops the throughput sampler and waits for it. It is idempotent
// and safe before Start.
func (d *Dashboard) Stop() {
	d.startMu.Lock()
	defer d.startMu.Unlock()
	d.sampler.close(d.started)
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

// register installs every route. A page needs the read permission, an
// action (a POST) the manage permission and the htmx request header from
// the same origin (see guard).
func (d *Dashboard) register() {
	d.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler()))
	d.mux.HandleFunc("GET /ui/login", d.loginPage)
	d.mux.HandleFunc("POST /ui/login", d.login)
	d.mux.HandleFunc("POST /ui/logout", d.logout)

	d.mux.HandleFunc("GET /{$}", d.guard(auth.PermRead, d.overview))
	d.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusFound) })
	d.mux.HandleFunc("GET /ui/throughput.json", d.guard(auth.PermRead, d.throughputJSON))
	d.mux.HandleFunc("GET /ui/queues/{name}", d.guard(auth.PermRead, d.queuePage))
	d.mux.HandleFunc("POST /ui/queues/{name}/{action}", d.guard(auth.PermManage, d.queueAction))
	d.mux.HandleFunc("GET /ui/jobs/{id}", d.guard(auth.PermRead, d.jobPage))
	d.mux.HandleFunc("POST /ui/jobs/{id}/{action}", d.guard(auth.PermManage, d.jobAction))
	d.mux.HandleFunc("GET /ui/dead", d.guard(auth.PermRead, d.deadPage))
	d.mux.HandleFunc("POST /ui/dead/retry", d.guard(auth.PermManage, d.deadRetry))
	d.mux.HandleFunc("GET /ui/workers", d.guard(auth.PermRead, d.workersPage))
	d.mux.HandleFunc("/", d.guard(auth.PermRead, func(w http.ResponseWriter, r *http.Request, v *viewer) {
		d.notFound(w, r, v, "There is no page at "+r.URL.Path+".")
	}))
}

// errNotFound is answered as the dashboard's 404 page.
var errNotFound = errors.New("not found")

// fail answers err: a missing job or queue (or one outside the caller's
// namespaces) as 404, bad input as 400, anything else as a logged 500
// whose detail stays in the log.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	var input *job.InputError
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, job.ErrNotFound):
		d.notFound(w, r, v, "It does not exist, or no longer does.")
	case errors.As(err, &input):
		d.message(w, r, v, http.StatusBadRequest, input.Error())
	case errors.Is(err, job.ErrInvalidState):
		d.message(w, r, v, http.StatusConflict, "That does not apply to the job in its present state; the page shows it as it is now.")
	case errors.Is(err, context.Canceled):
		// The browser went away; nobody reads the answer.
	default:
		d.opts.Logger.Error("dashboard: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		d.message(w, r, v, http.StatusInternalServerError, "Something went wrong on the server; its log has the detail.")
	}
}

// notFound answers 404 with a page (or, to htmx, a message).
func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request, v *viewer, text string) {
	d.message(w, r, v, http.StatusNotFound, text)
}

// message answers status with text: a flash message to an htmx request,
// else a page.
func (d *Dashboard) message(w http.ResponseWriter, r *http.Request, v *viewer, status int, text string) {
	if isHTMX(r) {
		d.flash(w, status, false, text)
		return
	}
	d.render(w, r, status, "message", &messagePage{page: page{Title: http.StatusText(status), Viewer: v}, Status: status, Text: text})
}

// flash answers an htmx action: a message swapped into the page's flash
// area. A success also asks the page's live parts to refresh.
func (d *Dashboard) flash(w http.ResponseWriter, status int, ok bool, text string) {
	if ok {
		w.Header().Set("HX-Trigger", "spool-refresh")
	}
	d.renderFragment(w, status, "message", "flash", flashMsg{OK: ok, Text: text})
}

// isHTMX reports whether r was sent by htmx.
func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// plural is "1 job" or "n jobs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
