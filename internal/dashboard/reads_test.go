package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spoolq/spool/internal/dashboard"
	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// countingStore counts the store calls that read jobs, so that a test can
// tell what a page costs the store.
type countingStore struct {
	store.Store
	jobList, jobGet, queueList atomic.Int64
}

func (c *countingStore) JobList(ctx context.Context, p *job.ListParams) (*job.ListPage, error) {
	c.jobList.Add(1)
	return c.Store.JobList(ctx, p)
}

func (c *countingStore) JobGet(ctx context.Context, id string) (*job.Job, error) {
	c.jobGet.Add(1)
	return c.Store.JobGet(ctx, id)
}

func (c *countingStore) QueueList(ctx context.Context) ([]job.QueueInfo, error) {
	c.queueList.Add(1)
	return c.Store.QueueList(ctx)
}

// counted is a dashboard without auth over an engine on a counting
// SQLite store, served over real HTTP.
type counted struct {
	t      *testing.T
	store  *countingStore
	engine *engine.Engine
	base   string
}

func setupCounted(t *testing.T) *counted {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Sync: "normal"})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cs := &countingStore{Store: st}
	e := engine.New(cs, engine.Config{})
	t.Cleanup(e.Close)
	d := dashboard.New(e, dashboard.Options{})
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return &counted{t: t, store: cs, engine: e, base: srv.URL}
}

// get fetches a dashboard path and returns its body, failing unless the
// answer is 200.
func (c *counted) get(path string) string {
	c.t.Helper()
	resp, err := http.Get(c.base + path)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	return string(body)
}

// TestOverviewReadsNoJobs: the overview finds each queue's oldest
// available job from the queue listing alone: however many queues hold
// available jobs (and whatever their payloads weigh), one render reads
// the listing once and never a job.
func TestOverviewReadsNoJobs(t *testing.T) {
	c := setupCounted(t)
	payload := json.RawMessage(`{"blob":"` + strings.Repeat("x", 64<<10) + `"}`)
	for i := range 10 {
		for range 3 {
			if _, err := c.engine.Enqueue(context.Background(), engine.EnqueueRequest{Queue: fmt.Sprintf("q%d", i), Kind: "k", Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.store.jobList.Store(0)
	c.store.jobGet.Store(0)
	c.store.queueList.Store(0)
	body := c.get("/?part=live")
	if n := c.store.jobList.Load() + c.store.jobGet.Load(); n != 0 {
		t.Errorf("one render of the overview read jobs %d times, want none", n)
	}
	if n := c.store.queueList.Load(); n != 1 {
		t.Errorf("one render of the overview listed the queues %d times, want 1", n)
	}
	// The oldest available job still shows: an age for every queue.
	for i := range 10 {
		row := fmt.Sprintf(`<tr data-queue="q%d">`, i)
		if !containsAgeAfter(body, row) {
			t.Errorf("queue q%d shows no age of its oldest available job", i)
		}
	}
}

// containsAgeAfter reports whether the table row that starts with row
// shows an age (a time with its exact value on hover) in its last cell.
func containsAgeAfter(body, row string) bool {
	_, rest, ok := strings.Cut(body, row)
	if !ok {
		return false
	}
	rest, _, _ = strings.Cut(rest, "</tr>")
	i := strings.LastIndex(rest, "<td>")
	return i >= 0 && strings.HasPrefix(rest[i:], `<td><span title="`)
}
