package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/humanize"
	"github.com/spoolq/spool/internal/job"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticVersion is a digest of the static files, added to their URLs so
// that browsers may cache them for long and still get a new build's.
var staticVersion = func() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFS.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}()

// staticHandler serves the embedded static files (the CSS, the script
// and the vendored libraries), cacheable for a day: their URLs change
// with their content.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(fmt.Sprintf("dashboard: static files: %v", err)) // the embed is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}

// page is what every page's layout needs.
type page struct {
	Title  string
	Viewer *viewer
	// Chart loads uPlot.
	Chart bool
	// Nav names the section of the top navigation to mark.
	Nav string
}

// messagePage is a page that only says something (404, 403, 500).
type messagePage struct {
	page
	Status int
	Text   string
}

// loginPage asks for a token.
type loginPage struct {
	page
	Next  string
	Error string
}

// moreNote says that a page left out More bytes of a value of job ID.
type moreNote struct {
	More int
	ID   string
}

// flashMsg is an action's answer, shown at the top of the page.
type flashMsg struct {
	OK   bool
	Text string
}

// pages holds a template set per page: the layout and shared partials
// with the page's own content.
type pages struct {
	sets map[string]*template.Template
}

// pageFiles lists the templates of each page beside the layout.
var pageFiles = map[string]string{
	"message":  "templates/message.html",
	"login":    "templates/login.html",
	"overview": "templates/overview.html",
	"queue":    "templates/queue.html",
	"job":      "templates/job.html",
	"dead":     "templates/dead.html",
	"workers":  "templates/workers.html",
}

func loadPages(now func() time.Time) *pages {
	base := template.Must(template.New("").Funcs(funcs(now)).ParseFS(templateFS, "templates/layout.html"))
	p := &pages{sets: map[string]*template.Template{}}
	for name, file := range pageFiles {
		p.sets[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, file))
	}
	return p
}

// render writes page name, whole, with status.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	d.write(w, status, name, "layout", data)
}

// renderFragment writes one block of page name (a part htmx swaps in).
func (d *Dashboard) renderFragment(w http.ResponseWriter, status int, name, block string, data any) {
	d.write(w, status, name, block, data)
}

func (d *Dashboard) write(w http.ResponseWriter, status int, name, block string, data any) {
	var buf bytes.Buffer
	if err := d.pages.sets[name].ExecuteTemplate(&buf, block, data); err != nil {
		d.opts.Logger.Error("dashboard: render", "page", name, "block", block, "err", err)
		http.Error(w, "the page could not be rendered; the server's log has the detail", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the templates' helpers; now is the engine's clock.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"static": func(path string) string { return "/ui/static/" + path + "?v=" + staticVersion },
		"ago":    func(t time.Time) string { return ago(t, now()) },
		"exact":  exact,
		"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"dur":    dur,
		"num":    num,
		"rate":   rate,
		"cut":    cut,
		"more":   func(n int, id string) moreNote { return moreNote{More: n, ID: id} },
		"states": func() []job.State { return job.States },
		"count":  func(m map[job.State]int64, s job.State) int64 { return m[s] },
		"age": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return dur(now().Sub(t))
		},
		"add":    func(a, b int) int { return a + b },
		"plural": plural,
	}
}

// ago says how far t is from now in words: "12 s ago", "3 min ago",
// "in 2 h".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d > -time.Second && d < time.Second {
		return "just now"
	}
	if d < 0 {
		return "in " + dur(-d)
	}
	return dur(d) + " ago"
}

// dur is a duration in its largest whole unit: "45 s", "3 min", "2 h",
// "5 d"; under a second, milliseconds.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + " d"
	}
}

// exact is a time as shown on hover: UTC to the millisecond.
func exact(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// num writes an integer with thousands separators.
func num(v any) string {
	var n int64
	switch v := v.(type) {
	case int:
		n = int64(v)
	case int64:
		n = v
	case uint32:
		n = int64(v)
	default:
		return fmt.Sprint(v)
	}
	return humanize.Int(n)
}

// rate is jobs per second, short.
func rate(r float64) string {
	switch {
	case r == 0:
		return "0"
	case r < 0.1:
		return strconv.FormatFloat(r, 'f', 2, 64)
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	default:
		return strconv.FormatFloat(math.Round(r), 'f', 0, 64)
	}
}

// cut shortens s to about n bytes, on a character boundary, with an
// ellipsis.
func cut(n int, s string) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8Start(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
