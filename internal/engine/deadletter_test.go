package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// Settings a queue may not have are refused naming the field, before the
// store hears of them.
func TestSetSettingsChecks(t *testing.T) {
	t.Parallel()
	e := newTestEngine() // no store: a refusal must come first
	for _, c := range []struct {
		name  string
		s     job.QueueSettings
		field string
	}{
		{"bad name", job.QueueSettings{}, "queue"},
		{"orders", job.QueueSettings{DeadLetterQueue: "orders"}, "dead_letter_queue"},
		{"orders", job.QueueSettings{DeadLetterQueue: "no spaces"}, "dead_letter_queue"},
		{"orders", job.QueueSettings{MaxWait: -time.Second}, "max_wait_ms"},
		{"orders", job.QueueSettings{MaxWait: time.Microsecond}, "max_wait_ms"},
		{"orders", job.QueueSettings{DefaultLease: time.Millisecond}, "default_lease_ms"},
		{"orders", job.QueueSettings{DefaultMaxAttempts: MaxAttempts + 1}, "default_max_attempts"},
		{"orders", job.QueueSettings{DefaultDelay: MaxDelay + time.Millisecond}, "default_delay_ms"},
	} {
		_, err := e.SetSettings(context.Background(), c.name, c.s)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != c.field {
			t.Errorf("%s %+v: %v, want an InputError on %s", c.name, c.s, err, c.field)
		}
	}
}

// dlqBundle is an engine on a real embedded store with a clock the test
// moves, and a queue "orders" whose dead jobs go to "orders-dlq" and
// whose jobs may wait a minute.
type dlqBundle struct {
	t     *testing.T
	ctx   context.Context
	e     *Engine
	clock *clock
}

func setupDeadLetters(t *testing.T) *dlqBundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := &dlqBundle{t: t, ctx: context.Background(), clock: &clock{now: t0}}
	b.e = New(st, Config{Clock: b.clock})
	q, err := b.e.SetSettings(b.ctx, "orders", job.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Minute})
	if err != nil || q.Settings.MaxWait != time.Minute {
		t.Fatalf("set settings: %+v, %v", q, err)
	}
	return b
}

func (b *dlqBundle) enqueue() string {
	b.t.Helper()
	res, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: "orders", Kind: "k", MaxAttempts: 1})
	if err != nil {
		b.t.Fatalf("enqueue: %v", err)
	}
	return res.ID
}

// park starts a fetch parked on the dead-letter queue and returns what it
// gets, once it is parked.
func (b *dlqBundle) park() <-chan []*job.Job {
	b.t.Helper()
	got := make(chan []*job.Job, 1)
	go func() {
		js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"orders-dlq"}, Wait: 10 * time.Second})
		if err != nil {
			b.t.Errorf("parked fetch: %v", err)
		}
		got <- js
	}()
	deadline := time.Now().Add(5 * time.Second)
	for b.e.Waiting() != 1 {
		if time.Now().After(deadline) {
			b.t.Fatal("the fetch did not park")
		}
		time.Sleep(time.Millisecond)
	}
	return got
}

// wantWoken fails unless the parked fetch got the copy of id, soon.
func (b *dlqBundle) wantWoken(got <-chan []*job.Job, id string) {
	b.t.Helper()
	select {
	case js := <-got:
		if len(js) != 1 || js[0].DeadLetterOf != (job.JobRef{Queue: "orders", ID: id}) {
			b.t.Fatalf("the parked fetch got %+v, want the copy of %s", js, id)
		}
	case <-time.After(2 * time.Second):
		b.t.Fatal("the fetch parked on the dead-letter queue was not woken")
	}
}

// A failure that kills a job wakes the fetches parked on its dead-letter
// queue.
func TestDeadLetterOfAFailureWakesItsQueue(t *testing.T) {
	t.Parallel()
	b := setupDeadLetters(t)
	id := b.enqueue()
	js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"orders"}})
	if err != nil || len(js) != 1 {
		t.Fatalf("fetch: %v, %v", js, err)
	}
	got := b.park()
	out, err := b.e.Fail(b.ctx, []job.FailItem{{ID: id, Token: js[0].LeaseToken, Message: "boom"}})
	if err != nil || out[0].State != job.StateDead || out[0].DeadLetter.Queue != "orders-dlq" {
		t.Fatalf("fail: %+v, %v", out, err)
	}
	b.wantWoken(got, id)
}

// A fetch that meets a job past its wait kills it and wakes the fetches
// parked on the dead-letter queue.
func TestDeadLetterOfAClaimWakesItsQueue(t *testing.T) {
	t.Parallel()
	b := setupDeadLetters(t)
	id := b.enqueue()
	got := b.park()
	b.clock.set(t0.Add(time.Minute))
	if js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"orders"}}); err != nil || len(js) != 0 {
		t.Fatalf("fetch past the wait: %v, %v; want nothing", js, err)
	}
	b.wantWoken(got, id)
}

// A settings patch keeps what it does not name: the README's dead-letter
// queue and maximum wait survive a change of the default lease, and a
// patch the queue may not have changes nothing.
func TestPatchSettingsKeepsTheRest(t *testing.T) {
	t.Parallel()
	b := setupDeadLetters(t)
	if _, err := b.e.PatchSettings(b.ctx, "no spaces", job.SettingsPatch{}); err == nil {
		t.Fatal("patch of a bad queue name: no error")
	}
	q, err := b.e.PatchSettings(b.ctx, "orders", job.SettingsPatch{DefaultLease: job.Set(5 * time.Minute)})
	want := job.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Minute, DefaultLease: 5 * time.Minute}
	if err != nil || q.Settings != want {
		t.Fatalf("patch: %+v, %v, want settings %v", q, err, want)
	}
	_, err = b.e.PatchSettings(b.ctx, "orders", job.SettingsPatch{MaxWait: job.Clear[time.Duration](), DeadLetterQueue: job.Set("orders")})
	var in *job.InputError
	if !errors.As(err, &in) || in.Field != "dead_letter_queue" {
		t.Fatalf("patch to itself: %v, want an InputError on dead_letter_queue", err)
	}
	if q, err := b.e.Queue(b.ctx, "orders"); err != nil || q.Settings != want {
		t.Fatalf("after a refused patch: %+v, %v, want settings %v", q, err, want)
	}
	q, err = b.e.PatchLimits(b.ctx, "orders", job.LimitsPatch{MaxActive: job.Set(3)})
	if err != nil || q.Limits != (job.Limits{MaxActive: 3}) || q.Settings != want {
		t.Fatalf("limits patch: %+v, %v", q, err)
	}
}
