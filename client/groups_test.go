package client_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// Two consumer groups each run every job of a queue with Workers of
// their own; a seek replays; the lag shows; a deleted group is gone.
func TestConsumerGroups(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		for _, g := range []string{"billing", "audit"} {
			if _, created, err := b.c.CreateConsumerGroup(b.ctx, "events", g, client.FromBeginning); err != nil || !created {
				t.Fatalf("create %s: created %v, %v", g, created, err)
			}
		}
		if _, created, err := b.c.CreateConsumerGroup(b.ctx, "events", "billing", client.FromNew); err != nil || created {
			t.Fatalf("create billing again: created %v, %v", created, err)
		}
		const n = 6
		ps := make([]client.EnqueueParams, n)
		for i := range ps {
			ps[i] = client.EnqueueParams{Queue: "events", Kind: "e", Payload: map[string]int{"n": i}}
		}
		if _, err := b.c.EnqueueBatch(b.ctx, ps); err != nil {
			t.Fatal(err)
		}
		g, err := b.c.ConsumerGroup(b.ctx, "events", "audit")
		if err != nil || g.Pending != n || g.OldestPendingAt == nil {
			t.Fatalf("audit before any work: %+v, %v", g, err)
		}
		var mu sync.Mutex
		seen := map[string][]string{}
		run := func(group string) {
			w := b.worker(client.WorkerConfig{Queues: []string{"events"}, ConsumerGroup: group, Concurrency: 3, Wait: 200 * time.Millisecond})
			w.Handle("e", func(ctx context.Context, j *client.Job) (any, error) {
				if j.ConsumerGroup != group || j.Queue != "events" {
					t.Errorf("group %s ran %s of %s/%s", group, j.ID, j.Queue, j.ConsumerGroup)
				}
				mu.Lock()
				seen[group] = append(seen[group], string(j.Payload))
				mu.Unlock()
				return nil, nil
			})
			done := runWorker(t, w)
			deadline := time.Now().Add(10 * time.Second)
			for {
				g, err := b.c.ConsumerGroup(b.ctx, "events", group)
				if err == nil && g.Counts.Completed == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("group %s: %+v, %v", group, g, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			stopWorker(t, w, done)
		}
		run("billing")
		run("audit")
		for _, g := range []string{"billing", "audit"} {
			got := slices.Clone(seen[g])
			slices.Sort(got)
			if len(got) != n || got[0] != `{"n":0}` || got[n-1] != `{"n":5}` {
				t.Fatalf("group %s ran %v, want each of the %d jobs once", g, seen[g], n)
			}
		}
		if q, err := b.c.Queue(b.ctx, "events"); err != nil || q.Counts.Available != n {
			t.Fatalf("the queue's own jobs after the groups ran: %+v, %v", q, err)
		}
		g, err = b.c.SeekConsumerGroup(b.ctx, "events", "audit", client.FromBeginning)
		if err != nil || g.Replayed != n || g.Counts.Available != n || g.Lag() <= 0 {
			t.Fatalf("seek audit to the beginning: %+v, %v", g, err)
		}
		gs, err := b.c.ConsumerGroups(b.ctx, "events")
		if err != nil || len(gs) != 2 || gs[0].Name != "audit" || gs[1].Pending != 0 {
			t.Fatalf("groups: %+v, %v", gs, err)
		}
		if err := b.c.DeleteConsumerGroup(b.ctx, "events", "audit"); err != nil {
			t.Fatal(err)
		}
		_, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"events"}, ConsumerGroup: "audit"})
		var ce *client.Error
		if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ce) || ce.Field != "consumer_group" {
			t.Fatalf("fetch for a deleted group: %v", err)
		}
	})
}
