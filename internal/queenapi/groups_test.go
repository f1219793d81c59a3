package queenapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queenapi"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// listingStore counts the store calls that list queues or consumer
// groups.
type listingStore struct {
	store.Store
	calls atomic.Int64
}

func (s *listingStore) QueueList(ctx context.Context) ([]job.QueueInfo, error) {
	s.calls.Add(1)
	return s.Store.QueueList(ctx)
}

func (s *listingStore) ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	s.calls.Add(1)
	return s.Store.ConsumerGroupList(ctx, queue)
}

func (s *listingStore) ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	s.calls.Add(1)
	return s.Store.ConsumerGroupListAll(ctx, p)
}

// Secrets of the listing test's tokens.
const (
	allSecret = "all-secret-0123456789"
	q00Secret = "q00-secret-0123456789"
)

// TestConsumerGroupListingReadsOnce: GET /api/v1/consumer-groups lists
// the groups of every queue (those of the token's namespaces) with one
// read of the store, however many queues have none, and a page of reads
// for each thousand groups.
func TestConsumerGroupListingReadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Sync: "normal"})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	counted := &listingStore{Store: st}
	e := engine.New(counted, engine.Config{})
	t.Cleanup(e.Close)
	authn, err := auth.New([]auth.Token{
		{Name: "all", Role: auth.RoleReadOnly, Secret: allSecret},
		{Name: "q00", Role: auth.RoleReadOnly, Namespaces: []string{"q00"}, Secret: q00Secret},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(queenapi.New(e, queenapi.Options{Auth: authn}))
	t.Cleanup(srv.Close)

	reqs := make([]engine.EnqueueRequest, 2000)
	for i := range reqs {
		reqs[i] = engine.EnqueueRequest{Queue: fmt.Sprintf("q%04d", i), Kind: "k"}
	}
	if _, err := e.EnqueueBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	for _, g := range [][2]string{{"q0001", "billing"}, {"q0002", "billing"}, {"q1500", "audit"}, {"q0001", "audit"}} {
		if _, _, err := e.CreateConsumerGroup(ctx, engine.ConsumerGroupRequest{Queue: g[0], Name: g[1], Start: job.StartBeginning}); err != nil {
			t.Fatal(err)
		}
	}

	list := func(secret string) []string {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+"/api/v1/consumer-groups", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		counted.calls.Store(0)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %d %s %v", resp.StatusCode, body, err)
		}
		var groups []struct {
			Name      string `json:"name"`
			QueueName string `json:"queueName"`
			TotalLag  int64  `json:"totalLag"`
		}
		if err := json.Unmarshal(body, &groups); err != nil {
			t.Fatalf("list: %s: %v", body, err)
		}
		var out []string
		for _, g := range groups {
			out = append(out, fmt.Sprintf("%s/%s:%d", g.QueueName, g.Name, g.TotalLag))
		}
		return out
	}
	if got, want := list(allSecret), []string{"q0001/audit:1", "q0001/billing:1", "q0002/billing:1", "q1500/audit:1"}; !slices.Equal(got, want) {
		t.Errorf("groups = %v, want %v", got, want)
	}
	if n := counted.calls.Load(); n != 1 {
		t.Errorf("the listing read the store %d times, want once", n)
	}
	if got, want := list(q00Secret), []string{"q0001/audit:1", "q0001/billing:1", "q0002/billing:1"}; !slices.Equal(got, want) {
		t.Errorf("groups of the namespace q00 = %v, want %v", got, want)
	}
	if n := counted.calls.Load(); n != 1 {
		t.Errorf("the listing of a namespace read the store %d times, want once", n)
	}

	// More groups than a page: every one of them, a read a page.
	for i := range job.MaxConsumerGroupPage {
		if _, _, err := e.CreateConsumerGroup(ctx, engine.ConsumerGroupRequest{Queue: fmt.Sprintf("q%04d", 1000+i), Name: "extra", Start: job.StartNew}); err != nil {
			t.Fatal(err)
		}
	}
	got := list(allSecret)
	if len(got) != 4+job.MaxConsumerGroupPage || got[3] != "q1000/extra:0" || got[len(got)-1] != "q1999/extra:0" || !slices.Contains(got, "q1500/audit:1") {
		t.Errorf("%d groups listed, from %v", len(got), got[:min(len(got), 5)])
	}
	if n := counted.calls.Load(); n != 2 {
		t.Errorf("the listing of %d groups read the store %d times, want twice", len(got), n)
	}
}
