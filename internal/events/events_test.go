package events

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func evs(n int, queue string) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = Of(Completed, time.Unix(0, 0), fmt.Sprintf("j%d", i), queue)
	}
	return out
}

// A subscriber gets what passes its filter, numbered in publish order.
func TestSubscribersGetTheirEventsInOrder(t *testing.T) {
	t.Parallel()
	b := NewBus(100)
	all, _, _ := b.Subscribe(Filter{}, false, 0, 100)
	onlyA, _, _ := b.Subscribe(Filter{Queues: []string{"a"}}, false, 0, 100)
	b.Publish(evs(3, "a"))
	b.Publish(evs(2, "b@g1")) // a consumer group's lane: queue b
	var ids []uint64
	for range 5 {
		e := <-all.C()
		ids = append(ids, e.ID)
	}
	if fmt.Sprint(ids) != "[1 2 3 4 5]" {
		t.Fatalf("ids %v", ids)
	}
	if len(onlyA.C()) != 3 {
		t.Fatalf("queue a's subscriber got %d events, want 3", len(onlyA.C()))
	}
	b.Publish([]Event{Of(Completed, time.Time{}, "x", "b@g1")})
	if e := <-all.C(); e.Queue != "b" || e.ConsumerGroup != "g1" {
		t.Fatalf("a lane's event: queue %q group %q", e.Queue, e.ConsumerGroup)
	}
}

// A reader that resumes gets the kept events after its last, and is told
// when some were no longer kept.
func TestResumeFromTheRing(t *testing.T) {
	t.Parallel()
	b := NewBus(10)
	b.Publish(evs(25, "q"))
	s, backlog, gap := b.Subscribe(Filter{}, true, 20, 10)
	defer s.Close()
	if gap || len(backlog) != 5 || backlog[0].ID != 21 || backlog[4].ID != 25 {
		t.Fatalf("resume after 20: gap %v, %d events from %v", gap, len(backlog), backlog)
	}
	s2, backlog, gap := b.Subscribe(Filter{}, true, 3, 10)
	defer s2.Close()
	if !gap || len(backlog) != 10 || backlog[0].ID != 16 {
		t.Fatalf("resume after 3 with 10 kept: gap %v, first %v", gap, backlog[0].ID)
	}
	s3, backlog, gap := b.Subscribe(Filter{}, true, 25, 10)
	defer s3.Close()
	if gap || len(backlog) != 0 {
		t.Fatalf("resume after the last: gap %v, %d events", gap, len(backlog))
	}
}

// A subscriber that falls behind is dropped and told so; the publisher
// never waits for it, and the others go on.
func TestASlowSubscriberIsDropped(t *testing.T) {
	t.Parallel()
	b := NewBus(100)
	slow, _, _ := b.Subscribe(Filter{}, false, 0, 4)
	fast, _, _ := b.Subscribe(Filter{}, false, 0, 1000)
	done := make(chan struct{})
	go func() {
		b.Publish(evs(50, "q"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish waited for a slow subscriber")
	}
	n := 0
	for range slow.C() {
		n++
	}
	if n != 4 || !slow.Dropped() {
		t.Fatalf("slow subscriber: %d events then closed, dropped %v; want 4 and dropped", n, slow.Dropped())
	}
	if len(fast.C()) != 50 || fast.Dropped() {
		t.Fatalf("fast subscriber: %d events, dropped %v", len(fast.C()), fast.Dropped())
	}
}

// Waiters on one job get that job's events only, and a closed bus ends
// every subscription without calling it dropped.
func TestJobWaitersAndClose(t *testing.T) {
	t.Parallel()
	b := NewBus(100)
	w, _, _ := b.Subscribe(Filter{Job: "j7"}, false, 0, 10)
	b.Publish(evs(10, "q"))
	if e := <-w.C(); e.Job != "j7" || len(w.C()) != 0 {
		t.Fatalf("job waiter got %v and %d more", e, len(w.C()))
	}
	if !Completed.Final() || Started.Final() || Failed.Final() {
		t.Fatal("final types")
	}
	b.Close()
	if _, ok := <-w.C(); ok || w.Dropped() {
		t.Fatal("a closed bus left a subscription open, or called it dropped")
	}
	w.Close() // idempotent
	late, _, _ := b.Subscribe(Filter{}, false, 0, 1)
	if _, ok := <-late.C(); ok {
		t.Fatal("a closed bus took a subscription")
	}
}

func TestFilterByKindAndNamespace(t *testing.T) {
	t.Parallel()
	f := Filter{Kinds: []string{"email"}, Allow: func(q string) bool { return q == "team-a" }}
	for _, c := range []struct {
		e    Event
		want bool
	}{
		{Event{Queue: "team-a", Kind: "email"}, true},
		{Event{Queue: "team-a", Kind: "sms"}, false},
		{Event{Queue: "team-a"}, true}, // kind unknown to the engine
		{Event{Queue: "team-b", Kind: "email"}, false},
		{Event{Queue: "team-a", Kind: "email", State: job.StateDead}, true},
	} {
		if got := f.Passes(&c.e); got != c.want {
			t.Errorf("%+v: passes %v, want %v", c.e, got, c.want)
		}
	}
}

func TestFilterByType(t *testing.T) {
	t.Parallel()
	b := NewBus(16)
	sub, _, _ := b.Subscribe(Filter{Types: []Type{Completed, Dead}}, false, 0, 8)
	defer sub.Close()
	for _, typ := range []Type{Enqueued, Started, Completed, Failed, Dead} {
		b.Publish([]Event{Of(typ, time.Now(), "j", "q")})
	}
	var got []Type
	for len(got) < 2 {
		got = append(got, (<-sub.C()).Type)
	}
	select {
	case e := <-sub.C():
		t.Fatalf("a %s event passed a filter of completed and dead", e.Type)
	default:
	}
	if !slices.Equal(got, []Type{Completed, Dead}) {
		t.Fatalf("got %v, want [job.completed job.dead]", got)
	}
}
