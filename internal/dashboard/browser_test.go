package dashboard_test

// The dashboard's end-to-end tests: a real server (server.New on a
// temporary data folder) with real jobs, driven through real headless
// Chromium with chromedp. Chromium comes from scripts/install-chromium
// (called by scripts/test); without it a test that opens a tab skips, or
// fails when every test is required (internal/testenv).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/server"
	"github.com/spoolq/spool/internal/testenv"
)

// browser is the one headless Chromium the tests share, started by the
// first test that opens a tab; each test opens its tabs in a browser
// context of its own (cookies apart).
var browser struct {
	once sync.Once
	ctx  context.Context
	err  error    // Chromium was found but would not start
	stop []func() // closes it
}

// chromePath finds Chromium: SPOOL_CHROME, else chromium,
// chromium-browser, google-chrome on PATH.
func chromePath() (string, error) {
	if p := os.Getenv("SPOOL_CHROME"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("SPOOL_CHROME=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH (run scripts/install-chromium, or set SPOOL_CHROME)")
}

// needBrowser returns the shared Chromium, starting it on first use. It
// is the one place that decides whether a browser test runs: without
// Chromium it ends t through testenv.Missing (a skip, or a failure when
// every test is required); a Chromium that will not start fails t.
func needBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := chromePath()
	if err != nil {
		testenv.Missing(t, "Chromium", err)
	}
	browser.once.Do(func() { browser.ctx, browser.err = startBrowser(path) })
	if browser.err != nil {
		t.Fatalf("start Chromium: %v", browser.err)
	}
	return browser.ctx
}

// startBrowser starts the headless Chromium at path.
func startBrowser(path string) (context.Context, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Names that resolve to the servers under test, as a DNS name its
		// owner points at a victim's address would (see othersite_test.go).
		chromedp.Flag("host-resolver-rules", "MAP "+rebound+" 127.0.0.1, MAP "+allowedName+" 127.0.0.1"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	browser.stop = []func(){cancel, cancelAlloc}
	if err := chromedp.Do(ctx); err != nil {
		return nil, err
	}
	return ctx, nil
}

// stopBrowser closes Chromium, if a test started it.
func stopBrowser() {
	for _, stop := range browser.stop {
		stop()
	}
}

func TestMain(m *testing.M) {
	// Runs the tests, closes Chromium and removes the PostgreSQL server
	// that tests on PostgreSQL started.
	pgtest.Main(m, stopBrowser)
}

// bundle is one real server reached over HTTP, with the token the API
// calls use when auth is on.
type bundle struct {
	t     *testing.T
	srv   *server.Server
	base  string
	token string
}

// setup starts a server on a fresh data folder and a free loopback port;
// change adjusts its config first.
func setup(t *testing.T, change ...func(*config.Config)) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	for _, c := range change {
		c(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop server: %v", err)
		}
	})
	return &bundle{t: t, srv: srv, base: "http://" + srv.Addr()}
}

// obj is a decoded JSON object.
type obj = map[string]any

// call sends an API request and decodes its JSON answer.
func (b *bundle) call(method, path string, body any) (int, obj) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		// As a client in another language would send it: no \u003c
		// for "<", so that the pages get markup-like text to escape.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			b.t.Fatal(err)
		}
		rd = &buf
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	var out obj
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			b.t.Fatalf("%s %s: answer is not JSON: %q", method, path, data)
		}
	}
	return resp.StatusCode, out
}

// must sends an API request and fails the test unless the status is want.
func (b *bundle) must(want int, method, path string, body any) obj {
	b.t.Helper()
	status, out := b.call(method, path, body)
	if status != want {
		b.t.Fatalf("%s %s: status %d, want %d; body %.500v", method, path, status, want, out)
	}
	return out
}

// enqueue enqueues one job and returns its id.
func (b *bundle) enqueue(job obj) string {
	b.t.Helper()
	return b.must(http.StatusCreated, "POST", "/v1/jobs", job)["id"].(string)
}

// leased is a fetched job: its id and lease token.
type leased struct {
	ID    string
	Token float64
}

// fetch leases up to max jobs of queue without waiting.
func (b *bundle) fetch(queue string, max int) []leased {
	b.t.Helper()
	out := b.must(200, "POST", "/v1/fetch", obj{"queues": []string{queue}, "max": max})
	var jobs []leased
	for _, j := range out["jobs"].([]any) {
		m := j.(obj)
		jobs = append(jobs, leased{ID: m["id"].(string), Token: m["lease"].(obj)["token"].(float64)})
	}
	return jobs
}

// complete fetches n jobs of queue and acks them.
func (b *bundle) complete(queue string, n int) []string {
	b.t.Helper()
	var ids []string
	for _, j := range b.fetch(queue, n) {
		b.must(200, "POST", "/v1/jobs/"+j.ID+"/ack", obj{"token": j.Token})
		ids = append(ids, j.ID)
	}
	if len(ids) != n {
		b.t.Fatalf("complete %d jobs of %s: fetched %d", n, queue, len(ids))
	}
	return ids
}

// kill enqueues a job of one attempt into queue and fails it with
// message: a dead job. It returns the job's id.
func (b *bundle) kill(queue, message string, payload obj) string {
	b.t.Helper()
	id := b.enqueue(obj{"queue": queue, "kind": "work", "payload": payload, "max_attempts": 1})
	found := false
	// Other available jobs of the queue may come first: hand them back.
	for _, j := range b.fetch(queue, 1000) {
		if j.ID == id {
			found = true
			b.must(200, "POST", "/v1/jobs/"+j.ID+"/fail", obj{"token": j.Token, "error": message})
			continue
		}
		b.must(200, "POST", "/v1/jobs/"+j.ID+"/release", obj{"token": j.Token})
	}
	if !found {
		b.t.Fatalf("kill %s: the fetch did not get it", id)
	}
	return id
}

// state is a job's state, by the API.
func (b *bundle) state(id string) string {
	b.t.Helper()
	return b.must(200, "GET", "/v1/jobs/"+id, nil)["state"].(string)
}

// counts is a queue's per-state counts, by the API.
func (b *bundle) counts(queue string) map[string]int {
	b.t.Helper()
	out := b.must(200, "GET", "/v1/queues/"+queue, nil)
	counts := map[string]int{}
	for k, v := range out["counts"].(obj) {
		counts[k] = int(v.(float64))
	}
	return counts
}

// tab is one browser tab on the bundle's server, in a browser context of
// its own, that accepts every confirmation dialog.
type tab struct {
	t   *testing.T
	b   *bundle
	ctx context.Context
}

// open opens a tab; width and height set its viewport (laptop width
// when zero).
func (b *bundle) open() *tab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(needBrowser(b.t), chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("open tab: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return &tab{t: b.t, b: b, ctx: ctx}
}

// timeout bounds each browser step.
const timeout = 20 * time.Second

// do runs steps, failing the test on an error.
func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// visit navigates to path on the server and waits for the page's main.
func (tb *tab) visit(path string) {
	tb.t.Helper()
	tb.do("visit "+path, chromedp.Navigate(tb.b.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

// eval evaluates a JavaScript expression and decodes its value.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the trimmed text of the first element matching a CSS selector,
// "" when there is none.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return strings.TrimSpace(eval[string](tb, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
}

// count is how many elements match a CSS selector.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return eval[int](tb, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// waitFor polls a JavaScript condition in the page until it holds. It
// survives navigations: a page that is being replaced is asked again.
func (tb *tab) waitFor(what, cond string) {
	tb.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	tb.t.Fatalf("waiting for %s (%s): timed out (last error: %v)\npage: %s", what, cond, last, tb.text("main"))
}

// waitText waits until the element of sel has text want.
func (tb *tab) waitText(sel, want string) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf("%s to read %q", sel, want),
		fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").trim() === %q`, sel, want))
}

// click clicks the first element matching a CSS selector.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// mark sets a marker on the page's window, which a reload would lose:
// marked reports it is still there.
func (tb *tab) mark() { eval[bool](tb, `window.__spoolMark = true`) }

func (tb *tab) marked() bool { return eval[bool](tb, `window.__spoolMark === true`) }

// screenshot writes a PNG of the whole page (of the viewport only unless
// full) to SPOOL_SCREENSHOTS/name when that variable names a folder
// (relative to the repository's root).
func (tb *tab) screenshot(name string, full bool) {
	tb.t.Helper()
	dir := os.Getenv("SPOOL_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // the test runs in internal/dashboard
	}
	ctx, cancel := context.WithTimeout(tb.ctx, timeout)
	defer cancel()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("wrote %s", filepath.Join(dir, name))
}

// sendKeys types text into the first element matching a CSS selector.
func sendKeys(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(sel), text)
}

// submit submits the first form matching a CSS selector.
func submit(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Submit(chromedp.CSS(sel))
}

// viewport sets the tab's viewport size.
func viewport(width, height int64) chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(width, height)
}

// emulateScheme makes the page see prefers-color-scheme: scheme.
func emulateScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}
