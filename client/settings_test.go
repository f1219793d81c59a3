package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

func TestQueueSettingsCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		all := client.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: 90 * time.Second,
			DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: 10 * time.Second}
		q, err := b.c.SetQueueSettings(b.ctx, "orders", all)
		if err != nil {
			t.Fatal(err)
		}
		if q.Name != "orders" || q.Settings != all {
			t.Fatalf("set settings: %+v", q)
		}
		if q, err := b.c.Queue(b.ctx, "orders"); err != nil || q.Settings != all {
			t.Fatalf("queue after set: %+v, %v", q, err)
		}
		// A set replaces the settings as a whole.
		only := client.QueueSettings{MaxWait: time.Minute}
		if q, err := b.c.SetQueueSettings(b.ctx, "orders", only); err != nil || q.Settings != only {
			t.Fatalf("replace settings: %+v, %v", q, err)
		}
		qs, err := b.c.Queues(b.ctx)
		if err != nil || len(qs) != 1 || qs[0].Settings != only {
			t.Fatalf("queues: %+v, %v", qs, err)
		}
		for _, c := range []struct {
			settings client.QueueSettings
			field    string
		}{
			{client.QueueSettings{DeadLetterQueue: "orders"}, "dead_letter_queue"},
			{client.QueueSettings{DeadLetterQueue: "not a name"}, "dead_letter_queue"},
			{client.QueueSettings{MaxWait: -time.Second}, "max_wait_ms"},
			{client.QueueSettings{MaxWait: 366 * 24 * time.Hour}, "max_wait_ms"},
			{client.QueueSettings{DefaultLease: 50 * time.Millisecond}, "default_lease_ms"},
			{client.QueueSettings{DefaultLease: 25 * time.Hour}, "default_lease_ms"},
			{client.QueueSettings{DefaultMaxAttempts: -1}, "default_max_attempts"},
			{client.QueueSettings{DefaultMaxAttempts: 1001}, "default_max_attempts"},
			{client.QueueSettings{DefaultDelay: -time.Second}, "default_delay_ms"},
			{client.QueueSettings{DefaultDelay: 366 * 24 * time.Hour}, "default_delay_ms"},
		} {
			_, err := b.c.SetQueueSettings(b.ctx, "orders", c.settings)
			var apiErr *client.Error
			if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Field != c.field {
				t.Errorf("settings %+v: %v, want invalid_argument on %s", c.settings, err, c.field)
			}
		}
		if q, err := b.c.Queue(b.ctx, "orders"); err != nil || q.Settings != only {
			t.Fatalf("refused settings changed the queue: %+v, %v", q, err)
		}
		if q, err := b.c.ClearQueueSettings(b.ctx, "orders"); err != nil || !q.Settings.IsZero() {
			t.Fatalf("clear settings: %+v, %v", q, err)
		}
		if q, err := b.c.ClearQueueSettings(b.ctx, "fresh"); err != nil || q.Name != "fresh" || !q.Settings.IsZero() {
			t.Fatalf("clear settings of an unknown queue: %+v, %v", q, err)
		}
	})
}

// A job that fails for good leaves a copy in the dead-letter queue, which
// a worker fetches with its history and origin; a job past its queue's
// maximum wait is never handed out and dies into the dead-letter queue.
func TestDeadLettersAndMaxWait(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		if _, err := b.c.SetQueueSettings(b.ctx, "orders", client.QueueSettings{DeadLetterQueue: "orders-dlq"}); err != nil {
			t.Fatal(err)
		}
		res, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "orders", Kind: "charge", Payload: map[string]int{"order": 7},
			MaxAttempts: 1, Tags: []string{"eu"}, Group: "tenant-1"})
		if err != nil {
			t.Fatal(err)
		}
		js, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"orders"}})
		if err != nil || len(js) != 1 {
			t.Fatalf("fetch: %v, %v", js, err)
		}
		parked := make(chan []*client.Job, 1)
		go func() {
			got, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"orders-dlq"}, Wait: 10 * time.Second})
			if err != nil {
				t.Errorf("fetch from the dead-letter queue: %v", err)
			}
			parked <- got
		}()
		if out, err := b.c.Fail(b.ctx, res.ID, js[0].Token(), client.FailParams{Error: "card declined"}); err != nil || out.State != client.StateDead {
			t.Fatalf("fail: %+v, %v", out, err)
		}
		got := <-parked
		if len(got) != 1 {
			t.Fatalf("the dead-letter queue handed out %d jobs", len(got))
		}
		c := got[0]
		if c.ID == res.ID || c.Kind != "charge" || string(c.Payload) != `{"order":7}` || c.Group != "tenant-1" ||
			len(c.Tags) != 1 || len(c.Errors) != 1 || c.Errors[0].Message != "card declined" ||
			c.DeadLetterOf == nil || *c.DeadLetterOf != (client.JobRef{Queue: "orders", ID: res.ID}) {
			t.Fatalf("dead-letter copy %+v", c)
		}
		if dead, err := b.c.Get(b.ctx, res.ID); err != nil || dead.State != client.StateDead || dead.DeadLetterOf != nil {
			t.Fatalf("the dead original: %+v, %v", dead, err)
		}

		if _, err := b.c.SetQueueSettings(b.ctx, "orders", client.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		late, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "orders", Kind: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if js, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"orders"}}); err != nil || len(js) != 0 {
			t.Fatalf("fetch past the wait: %v, %v; want nothing", js, err)
		}
		j, err := b.c.Get(b.ctx, late.ID)
		if err != nil || j.State != client.StateDead || len(j.Errors) != 1 || j.Errors[0].Message != "not started within max wait" {
			t.Fatalf("job past its wait: %+v, %v", j, err)
		}
		copies, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"orders-dlq"}, Max: 10})
		if err != nil || len(copies) != 1 || copies[0].DeadLetterOf.ID != late.ID {
			t.Fatalf("copies of the job past its wait: %+v, %v", copies, err)
		}
	})
}

// A job enqueued without a lease, maximum attempts or delay takes its
// queue's defaults; one with its own keeps them.
func TestQueueJobDefaults(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		defaults := client.QueueSettings{DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: time.Hour}
		if _, err := b.c.SetQueueSettings(b.ctx, "orders", defaults); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		res, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "orders", Kind: "charge"})
		if err != nil {
			t.Fatal(err)
		}
		j, err := b.c.Get(b.ctx, res.ID)
		if err != nil || j.LeaseDuration != 5*time.Minute || j.MaxAttempts != 3 || j.State != client.StateScheduled ||
			j.RunAt.Before(before.Add(time.Hour-time.Second)) {
			t.Fatalf("job with the queue's defaults: %+v, %v", j, err)
		}
		res, err = b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "orders", Kind: "charge", Lease: time.Second, MaxAttempts: 7, RunAt: before})
		if err != nil {
			t.Fatal(err)
		}
		if j, err := b.c.Get(b.ctx, res.ID); err != nil || j.LeaseDuration != time.Second || j.MaxAttempts != 7 || j.State != client.StateAvailable {
			t.Fatalf("job with its own values: %+v, %v", j, err)
		}
	})
}

func TestQueueSettingsJSON(t *testing.T) {
	t.Parallel()
	q := client.Queue{Name: "q", Settings: client.QueueSettings{DeadLetterQueue: "d", MaxWait: 1500 * time.Microsecond}}
	data, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	// The wait is rounded up to whole milliseconds.
	if !strings.Contains(string(data), `"settings":{"dead_letter_queue":"d","max_wait_ms":2}`) {
		t.Fatalf("queue JSON: %s", data)
	}
	var back client.Queue
	if err := json.Unmarshal(data, &back); err != nil || back.Settings != (client.QueueSettings{DeadLetterQueue: "d", MaxWait: 2 * time.Millisecond}) {
		t.Fatalf("round trip: %+v, %v", back.Settings, err)
	}
	defaults := client.QueueSettings{DefaultLease: 1500 * time.Millisecond, DefaultMaxAttempts: 4, DefaultDelay: 10*time.Second + time.Microsecond}
	data, err = json.Marshal(defaults)
	if err != nil || string(data) != `{"default_lease_ms":1500,"default_max_attempts":4,"default_delay_ms":10001}` {
		t.Fatalf("defaults JSON: %s, %v", data, err)
	}
	var defaultsBack client.QueueSettings
	if err := json.Unmarshal(data, &defaultsBack); err != nil ||
		defaultsBack != (client.QueueSettings{DefaultLease: 1500 * time.Millisecond, DefaultMaxAttempts: 4, DefaultDelay: 10001 * time.Millisecond}) {
		t.Fatalf("defaults round trip: %+v, %v", defaultsBack, err)
	}
	if data, _ := json.Marshal(client.Queue{Name: "plain"}); strings.Contains(string(data), "settings") {
		t.Fatalf("a queue without settings: %s", data)
	}
	j, _ := json.Marshal(client.Job{ID: "j", DeadLetterOf: &client.JobRef{Queue: "orders", ID: "x"}})
	var jb client.Job
	if err := json.Unmarshal(j, &jb); err != nil || !strings.Contains(string(j), `"dead_letter_of":{"queue":"orders","id":"x"}`) ||
		jb.DeadLetterOf == nil || jb.DeadLetterOf.ID != "x" {
		t.Fatalf("job JSON %s: %+v, %v", j, jb, err)
	}
}
