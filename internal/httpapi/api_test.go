package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/api"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/metrics"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/store/tiered"
)

// stepTimeout bounds one step of a test on its own (a dial, a request, a
// wait for one answer), never a test's whole run, so that a loaded machine
// makes a long test slower rather than failing it.
const stepTimeout = 30 * time.Second

// newTestAPI returns the API on a real store in a temporary folder.
func newTestAPI(t testing.TB) *API {
	t.Helper()
	return newTestAPIWith(t, Options{})
}

// newTestAPIWith is newTestAPI with opts; a nil Logger discards the logs.
func newTestAPIWith(t testing.TB, opts Options) *API {
	t.Helper()
	a, _ := newTestAPIStore(t, opts)
	return a
}

// newTestAPIStore is newTestAPIWith that also returns the durable store,
// for tests that break it. As in the embedded server, a memory tier keeps
// the jobs of memory durability beside it.
func newTestAPIStore(t testing.TB, opts Options) (*API, *sqlitestore.Store) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx := context.Background()
	disk, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Memory: true, TokensFrom: disk, Logger: opts.Logger})
	if err != nil {
		_ = disk.Close()
		t.Fatal(err)
	}
	st, err := tiered.New(ctx, disk, mem)
	if err != nil {
		_ = disk.Close()
		_ = mem.Close()
		t.Fatal(err)
	}
	if opts.Metrics == nil {
		// Every test API serves metrics, so that the route's auth is tested.
		// They are read afresh at each scrape.
		opts.Metrics = metrics.New(metrics.Config{Queues: st.QueueList, CacheFor: time.Nanosecond}).Handler()
	}
	e := engine.New(st, engine.Config{DecodeJob: DecodeJob})
	t.Cleanup(func() {
		e.Close()
		_ = st.Close()
	})
	return New(e, opts), disk
}

type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas struct {
			ErrorCode struct {
				Enum []string `json:"enum"`
			}
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("parse openapi.json: %v", err)
	}
	return doc
}

// Every route the router serves is in the OpenAPI document, and every
// operation of the document is served: the two cannot drift apart.
func TestRoutesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "post", "put", "patch", "delete":
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range a.Routes() {
		served[r.Method+" "+r.Pattern] = true
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("served but not documented: %v; documented but not served: %v", missing, extra)
	}
}

// The error codes of the document are exactly the catalog's.
func TestErrorCatalogMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	enum := doc.Components.Schemas.ErrorCode.Enum
	if len(enum) == 0 {
		t.Fatal("no error code enum found in the OpenAPI document")
	}
	inDoc := map[string]bool{}
	for _, c := range enum {
		inDoc[c] = true
		if _, ok := Catalog[Code(c)]; !ok {
			t.Errorf("documented code %q is not in the catalog", c)
		}
	}
	for c := range Catalog {
		if !inDoc[string(c)] {
			t.Errorf("catalog code %q is not documented", c)
		}
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/nowhere", 404, "not_found", ""},
		{"PUT", "/v1/fetch", 405, "method_not_allowed", "POST"},
		{"PATCH", "/v1/jobs/abc", 405, "method_not_allowed", "DELETE, GET"},
		{"GET", "/v1/queues/q/pause", 405, "method_not_allowed", "POST"},
	} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		var body errorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != tc.status || string(body.Error.Code) != tc.code || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %s Allow=%q, want %d %s Allow=%q", tc.method, tc.path, rec.Code, body.Error.Code,
				rec.Header().Get("Allow"), tc.status, tc.code, tc.allow)
		}
	}
}

func TestOversizedBodyIs413(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.opts.MaxBodyBytes = 1024
	big := `{"queue":"q","kind":"k","payload":"` + strings.Repeat("x", 4096) + `"}`
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(big)))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "payload_too_large") {
		t.Fatalf("oversized body: %d %s", rec.Code, rec.Body)
	}
}
