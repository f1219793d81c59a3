package bench

import (
	"context"
	"testing"
	"time"
)

// Requests that start close together share one context, which ends no
// sooner than half of requestTimeout and no later than requestTimeout
// after each of them started; a new parent, or a deadline too near, gets
// a new one; cancelling the parent ends it.
func TestSharedDeadline(t *testing.T) {
	var d sharedDeadline
	parent, cancel := context.WithCancel(context.Background())
	start := time.Now()
	a := d.within(parent)
	if b := d.within(parent); b != a {
		t.Fatal("two requests at once got two contexts")
	}
	deadline, ok := a.Deadline()
	if !ok || deadline.Before(start.Add(requestTimeout/2)) || deadline.After(time.Now().Add(requestTimeout)) {
		t.Fatalf("deadline %v after %v, want between half of %v and all of it", deadline, start, requestTimeout)
	}
	if other := d.within(context.Background()); other == a {
		t.Fatal("a request under another parent shared the context")
	}
	near := &deadlineContext{parent: parent, ctx: a, deadline: time.Now().Add(requestTimeout/2 - time.Second)}
	d.cur.Store(near)
	fresh := d.within(parent)
	if fresh == a {
		t.Fatal("a request got a context that ends in less than half of requestTimeout")
	}
	cancel()
	select {
	case <-fresh.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the parent did not end the shared context")
	}
}
