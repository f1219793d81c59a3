package pgstore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// A node that listens keeps the queues' defaults it read; a change made
// on another node reaches it through a notification, well before the
// entry would expire, and one made on the node itself at once.
func TestQueueDefaultsFollowOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	a := open(t, url)
	b, err := Open(ctx, Config{URL: url, Migrate: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: store.Hooks{OnAvailable: func([]string) {}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !b.defaults.listening.Load() {
		if time.Now().After(deadline) {
			t.Fatal("node b never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.QueueSetPaused(ctx, "q", false); err != nil { // makes the queue, with no change of its defaults
		t.Fatal(err)
	}
	if d, err := b.QueueDefaults(ctx, "q"); err != nil || d.Durability != job.DurabilityFull {
		t.Fatalf("defaults on b: %+v, %v", d, err)
	}
	if _, ok := b.defaults.get("q", time.Now()); !ok {
		t.Fatal("b did not keep the defaults it read")
	}
	// Within defaultsTTL of b's read: only the notification can tell b.
	changed := time.Now()
	if err := a.QueueSetDurability(ctx, "q", job.DurabilityProcess); err != nil {
		t.Fatal(err)
	}
	waitDefaults(t, b, "q", changed, func(d store.QueueDefaults) bool { return d.Durability == job.DurabilityProcess })
	changed = time.Now()
	settings := job.QueueSettings{DefaultLease: 9 * time.Second, DefaultMaxAttempts: 2}
	if err := a.QueueSetSettings(ctx, "q", settings); err != nil {
		t.Fatal(err)
	}
	waitDefaults(t, b, "q", changed, func(d store.QueueDefaults) bool { return d.Settings == settings })
	// b's own change holds for b's next read.
	if err := b.QueueSetDurability(ctx, "q", job.DurabilityFull); err != nil {
		t.Fatal(err)
	}
	if d, err := b.QueueDefaults(ctx, "q"); err != nil || d.Durability != job.DurabilityFull {
		t.Fatalf("defaults on b after its own change: %+v, %v", d, err)
	}
	// An unknown queue is not remembered as unknown: a job inserted on
	// any node creates it, and the next read on b finds it at once.
	if _, err := b.QueueDefaults(ctx, "later"); err == nil {
		t.Fatal("defaults of an unknown queue")
	}
	if _, err := b.QueueDefaults(ctx, "created"); err == nil {
		t.Fatal("defaults of an unknown queue")
	}
	if _, err := a.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{{Queue: "created", Kind: "k",
		Payload: []byte(`1`), State: job.StateAvailable, MaxAttempts: 1, LeaseDuration: time.Second, RunAt: time.Now()}},
		Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueueDefaults(ctx, "created"); err != nil {
		t.Fatalf("defaults of a queue a job created, read at once on another node: %v", err)
	}
	changed = time.Now()
	if err := a.QueueSetDurability(ctx, "later", job.DurabilityProcess); err != nil {
		t.Fatal(err)
	}
	waitDefaults(t, b, "later", changed, func(d store.QueueDefaults) bool { return d.Durability == job.DurabilityProcess })
}

// waitDefaults waits until b's defaults of queue satisfy ok, and fails
// unless that happened sooner after changed than an entry could expire.
func waitDefaults(t *testing.T, b *Store, queue string, changed time.Time, ok func(store.QueueDefaults) bool) {
	t.Helper()
	for {
		d, err := b.QueueDefaults(context.Background(), queue)
		if err == nil && ok(d) {
			if took := time.Since(changed); took >= defaultsTTL {
				t.Fatalf("the change reached b after %v, as an expiry would", took)
			}
			return
		}
		if time.Since(changed) > 5*time.Second {
			t.Fatalf("b never saw the change: %+v, %v", d, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
