package client_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// A patch sends only what it changes: a set value, null for Unset, and
// nothing for a field it leaves.
func TestPatchJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		patch any
		want  string
	}{
		{client.QueueSettingsPatch{}, `{}`},
		{client.QueueSettingsPatch{DefaultLease: client.SetTo(5 * time.Minute), MaxWait: client.Unset[time.Duration]()},
			`{"default_lease_ms":300000,"max_wait_ms":null}`},
		{client.QueueSettingsPatch{DeadLetterQueue: client.SetTo("dlq"), DefaultDelay: client.SetTo(1500 * time.Microsecond)},
			`{"dead_letter_queue":"dlq","default_delay_ms":2}`},
		{client.LimitsPatch{Rate: client.SetTo(client.RatePatch{Limit: client.SetTo(5)}), MaxActive: client.Unset[int]()},
			`{"max_active":null,"rate":{"limit":5}}`},
		{client.LimitsPatch{GroupRate: client.SetRate(client.Rate{Limit: 2, Period: time.Second}), Ordered: client.SetTo(true),
			Rate: client.Unset[client.RatePatch]()}, `{"group_rate":{"limit":2,"period_ms":1000},"ordered":true,"rate":null}`},
	} {
		got, err := json.Marshal(c.patch)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %s, %v, want %s", c.patch, got, err, c.want)
		}
	}
}

// An update changes what it names and keeps the rest, on a real server;
// a refused one changes nothing.
func TestUpdateQueueSettingsCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		if _, err := b.c.SetQueueSettings(b.ctx, "emails", client.QueueSettings{DeadLetterQueue: "emails-dlq", MaxWait: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		q, err := b.c.UpdateQueueSettings(b.ctx, "emails", client.QueueSettingsPatch{DefaultLease: client.SetTo(5 * time.Minute)})
		want := client.QueueSettings{DeadLetterQueue: "emails-dlq", MaxWait: 10 * time.Minute, DefaultLease: 5 * time.Minute}
		if err != nil || q.Settings != want {
			t.Fatalf("update the lease: %+v, %v, want settings %+v", q, err, want)
		}
		q, err = b.c.UpdateQueueSettings(b.ctx, "emails", client.QueueSettingsPatch{MaxWait: client.Unset[time.Duration](), DefaultMaxAttempts: client.SetTo(4)})
		want = client.QueueSettings{DeadLetterQueue: "emails-dlq", DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 4}
		if err != nil || q.Settings != want {
			t.Fatalf("unset the wait: %+v, %v, want settings %+v", q, err, want)
		}
		for _, c := range []struct {
			patch client.QueueSettingsPatch
			field string
		}{
			{client.QueueSettingsPatch{DeadLetterQueue: client.SetTo("emails"), DefaultLease: client.Unset[time.Duration]()}, "dead_letter_queue"},
			{client.QueueSettingsPatch{DefaultMaxAttempts: client.SetTo(0)}, "default_max_attempts"},
			{client.QueueSettingsPatch{DefaultDelay: client.SetTo(-time.Second)}, "default_delay_ms"},
		} {
			_, err := b.c.UpdateQueueSettings(b.ctx, "emails", c.patch)
			var apiErr *client.Error
			if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Field != c.field {
				t.Errorf("patch %+v: %v, want invalid_argument on %s", c.patch, err, c.field)
			}
		}
		if q, err := b.c.Queue(b.ctx, "emails"); err != nil || q.Settings != want {
			t.Fatalf("refused patches changed the queue: %+v, %v", q, err)
		}
	})
}

func TestUpdateQueueLimitsCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		if _, err := b.c.SetQueueLimits(b.ctx, "hooks", client.Limits{Rate: client.Rate{Limit: 50, Period: time.Second}, MaxActive: 20}); err != nil {
			t.Fatal(err)
		}
		q, err := b.c.UpdateQueueLimits(b.ctx, "hooks", client.LimitsPatch{
			Rate: client.SetTo(client.RatePatch{Limit: client.SetTo(100)}), MaxActive: client.Unset[int](), GroupMaxActive: client.SetTo(2)})
		want := client.Limits{Rate: client.Rate{Limit: 100, Period: time.Second}, GroupMaxActive: 2}
		if err != nil || q.Limits != want {
			t.Fatalf("update limits: %+v, %v, want limits %+v", q, err, want)
		}
		_, err = b.c.UpdateQueueLimits(b.ctx, "hooks", client.LimitsPatch{GroupRate: client.SetTo(client.RatePatch{Limit: client.SetTo(3)})})
		var apiErr *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Field != "group_rate.period_ms" {
			t.Fatalf("a rate without its period: %v, want invalid_argument on group_rate.period_ms", err)
		}
		if q, err := b.c.Queue(b.ctx, "hooks"); err != nil || q.Limits != want {
			t.Fatalf("a refused patch changed the queue: %+v, %v", q, err)
		}
	})
}
