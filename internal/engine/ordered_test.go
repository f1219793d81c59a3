package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// A fetch parked on an ordered queue whose group is held by a job
// waiting out its backoff wakes at once when that job is cancelled or
// deleted, and gets the group's next job.
func TestHeldGroupFreedByCancelOrDeleteWakesAFetch(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancel", "delete"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			e := New(st, Config{})
			if _, err := e.SetLimits(ctx, "events", job.Limits{Ordered: true}); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for range 2 {
				res, err := e.Enqueue(ctx, EnqueueRequest{Queue: "events", Kind: "k", Group: "order-1"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
			}
			first, err := e.Fetch(ctx, FetchRequest{Queues: []string{"events"}})
			if err != nil || len(first) != 1 || first[0].ID != ids[0] {
				t.Fatalf("first fetch: %v, %v", first, err)
			}
			if _, err := e.Fail(ctx, []job.FailItem{{ID: ids[0], Token: first[0].LeaseToken, Message: "later", RetryAfter: time.Hour}}); err != nil {
				t.Fatal(err)
			}
			got := make(chan []*job.Job, 1)
			go func() {
				js, _ := e.Fetch(ctx, FetchRequest{Queues: []string{"events"}, Wait: 10 * time.Second})
				got <- js
			}()
			for e.Waiting() == 0 {
				time.Sleep(time.Millisecond)
			}
			// Past the first claim of the parked fetch, which found the
			// group held; a second parks again.
			time.Sleep(20 * time.Millisecond)
			began := time.Now()
			if how == "cancel" {
				_, err = e.Cancel(ctx, ids[0])
			} else {
				err = e.Delete(ctx, ids[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case js := <-got:
				if len(js) != 1 || js[0].ID != ids[1] {
					t.Fatalf("woken fetch got %v, want %s", js, ids[1])
				}
				if d := time.Since(began); d > 500*time.Millisecond {
					t.Fatalf("the fetch woke after %v, not at once", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the parked fetch did not wake")
			}
		})
	}
}
