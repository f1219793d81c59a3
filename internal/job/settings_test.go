package job

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestQueueSettingsCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		s     QueueSettings
		field string // "" when valid
	}{
		{"none", QueueSettings{}, ""},
		{"both", QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Minute}, ""},
		{"shortest wait", QueueSettings{MaxWait: time.Millisecond}, ""},
		{"longest wait", QueueSettings{MaxWait: LongestMaxWait}, ""},
		{"itself", QueueSettings{DeadLetterQueue: "orders"}, "dead_letter_queue"},
		{"not a name", QueueSettings{DeadLetterQueue: "bad name"}, "dead_letter_queue"},
		{"negative wait", QueueSettings{MaxWait: -time.Millisecond}, "max_wait_ms"},
		{"under a millisecond", QueueSettings{MaxWait: time.Microsecond}, "max_wait_ms"},
		{"a fraction of a millisecond", QueueSettings{MaxWait: 1500 * time.Microsecond}, "max_wait_ms"},
		{"over a year", QueueSettings{MaxWait: LongestMaxWait + time.Millisecond}, "max_wait_ms"},
		{"every default", QueueSettings{DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: 10 * time.Second}, ""},
		{"shortest defaults", QueueSettings{DefaultLease: MinLease, DefaultMaxAttempts: 1, DefaultDelay: time.Millisecond}, ""},
		{"longest defaults", QueueSettings{DefaultLease: MaxLease, DefaultMaxAttempts: MaxAttempts, DefaultDelay: MaxDelay}, ""},
		{"lease too short", QueueSettings{DefaultLease: MinLease - time.Millisecond}, "default_lease_ms"},
		{"lease too long", QueueSettings{DefaultLease: MaxLease + time.Millisecond}, "default_lease_ms"},
		{"negative lease", QueueSettings{DefaultLease: -time.Second}, "default_lease_ms"},
		{"lease in a fraction of a millisecond", QueueSettings{DefaultLease: time.Second + time.Microsecond}, "default_lease_ms"},
		{"no attempts", QueueSettings{DefaultMaxAttempts: -1}, "default_max_attempts"},
		{"too many attempts", QueueSettings{DefaultMaxAttempts: MaxAttempts + 1}, "default_max_attempts"},
		{"negative delay", QueueSettings{DefaultDelay: -time.Millisecond}, "default_delay_ms"},
		{"delay under a millisecond", QueueSettings{DefaultDelay: time.Microsecond}, "default_delay_ms"},
		{"delay over a year", QueueSettings{DefaultDelay: MaxDelay + time.Millisecond}, "default_delay_ms"},
	} {
		err := c.s.Check("orders")
		var in *InputError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want valid", c.name, err)
		case c.field != "" && (!errors.As(err, &in) || in.Field != c.field):
			t.Errorf("%s: %v, want an InputError on %s", c.name, err, c.field)
		}
	}
}

// The settings are comparable, so a field added later keeps IsZero and
// the stores' comparisons working as they are.
func TestQueueSettingsIsZero(t *testing.T) {
	t.Parallel()
	if !(QueueSettings{}).IsZero() || (QueueSettings{MaxWait: time.Second}).IsZero() || (QueueSettings{DeadLetterQueue: "d"}).IsZero() ||
		(QueueSettings{DefaultLease: time.Second}).IsZero() || (QueueSettings{DefaultMaxAttempts: 1}).IsZero() ||
		(QueueSettings{DefaultDelay: time.Second}).IsZero() {
		t.Fatal("IsZero is wrong")
	}
}

func TestDeadLetterFor(t *testing.T) {
	t.Parallel()
	s := QueueSettings{DeadLetterQueue: "dlq"}
	for _, st := range States {
		want := ""
		if st == StateDead {
			want = "dlq"
		}
		if got := s.DeadLetterFor(st, false); got != want {
			t.Errorf("moving to %s: %q, want %q", st, got, want)
		}
		// A copy is copied no more, whatever it moves to.
		if got := s.DeadLetterFor(st, true); got != "" {
			t.Errorf("a copy moving to %s: %q, want none", st, got)
		}
	}
	if got := (QueueSettings{}).DeadLetterFor(StateDead, false); got != "" {
		t.Errorf("without a dead-letter queue: %q", got)
	}
}

func TestPastMaxWait(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		attempt int
		maxWait time.Duration
		after   time.Duration
		want    bool
	}{
		{"before the deadline", 0, time.Minute, time.Minute - time.Nanosecond, false},
		{"at the deadline", 0, time.Minute, time.Minute, true},
		{"past the deadline", 0, time.Minute, time.Hour, true},
		{"started once", 1, time.Minute, time.Hour, false},
		{"no maximum wait", 0, 0, 24 * time.Hour, false},
		{"not yet due", 0, time.Minute, -time.Hour, false},
	} {
		if got := PastMaxWait(c.attempt, runAt, c.maxWait, runAt.Add(c.after)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if d := WaitDeadline(0, runAt, time.Minute); !d.Equal(runAt.Add(time.Minute)) {
		t.Errorf("deadline %v", d)
	}
	if d := WaitDeadline(2, runAt, time.Minute); !d.IsZero() {
		t.Errorf("deadline of a started job %v, want none", d)
	}
}

func TestAfterMaxWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	state, e := AfterMaxWait(0, now)
	if state != StateDead || e != (AttemptError{Attempt: 1, Message: MaxWaitMessage, At: now}) {
		t.Fatalf("AfterMaxWait(0): %s %+v", state, e)
	}
	if _, e := AfterMaxWait(2, now); e.Attempt != 3 {
		t.Fatalf("AfterMaxWait(2) records attempt %d, want 3", e.Attempt)
	}
}

func TestDeadLetter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	dead := &Job{
		ID: "orig", Queue: "orders", Kind: "charge", Payload: json.RawMessage(`{"n":1}`), Priority: 7,
		State: StateDead, RunAt: t0, Attempt: 3, MaxAttempts: 3,
		Backoff:       Backoff{Kind: BackoffFixed, Base: time.Second, Max: time.Minute, Jitter: 0.1},
		LeaseDuration: 2 * time.Minute, UniqueKey: "u", UniqueFor: time.Hour, Tags: []string{"a", "b"},
		Group: "tenant-1", Durability: DurabilityProcess, Result: json.RawMessage(`1`),
		Errors:        []AttemptError{{Attempt: 1, Message: "boom", At: t0}, {Attempt: 3, Message: "lease expired", At: now}},
		ErrorsDropped: 4,
		Progress:      json.RawMessage(`{"pct":5}`), LeaseToken: 42, CreatedAt: t0, StartedAt: t0, FinishedAt: now,
		DeadLetterOf: JobRef{Queue: "upstream", ID: "older"}, Worker: "host-1/pid-7",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	got := DeadLetter(dead, "orders-dlq", "copy", now)
	want := &Job{
		ID: "copy", Queue: "orders-dlq", Kind: "charge", Payload: json.RawMessage(`{"n":1}`), Priority: 7,
		State: StateAvailable, RunAt: now, MaxAttempts: 3, Backoff: dead.Backoff, LeaseDuration: 2 * time.Minute,
		Tags: []string{"a", "b"}, Group: "tenant-1", Durability: DurabilityProcess, Errors: dead.Errors,
		ErrorsDropped: 4, CreatedAt: now, DeadLetterOf: JobRef{Queue: "orders", ID: "orig"}, TraceParent: dead.TraceParent,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DeadLetter:\n got %+v\nwant %+v", got, want)
	}
	got.Tags[0], got.Errors[0].Message = "changed", "changed"
	if dead.Tags[0] != "a" || dead.Errors[0].Message != "boom" {
		t.Fatal("the copy shares its tags or errors with the dead job")
	}
}

// The JSON form of QueueSettings is what the embedded store keeps: its
// names and units must read the rows written before.
func TestQueueSettingsJSONForm(t *testing.T) {
	t.Parallel()
	s := QueueSettings{DeadLetterQueue: "dlq", MaxWait: time.Second, DefaultLease: 2 * time.Second, DefaultMaxAttempts: 3,
		DefaultDelay: time.Millisecond}
	const stored = `{"dead_letter_queue":"dlq","max_wait_ns":1000000000,"default_lease_ns":2000000000,"default_max_attempts":3,"default_delay_ns":1000000}`
	if b, err := json.Marshal(s); err != nil || string(b) != stored {
		t.Errorf("marshal: %s, %v; want %s", b, err, stored)
	}
	var back QueueSettings
	if err := json.Unmarshal([]byte(`{"max_wait_ns":5000000}`), &back); err != nil || back != (QueueSettings{MaxWait: 5 * time.Millisecond}) {
		t.Errorf("unmarshal a row with one setting: %+v, %v", back, err)
	}
}
