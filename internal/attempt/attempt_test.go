package attempt

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

var now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func TestEnds(t *testing.T) {
	dlq := job.QueueSettings{DeadLetterQueue: "dlq"}
	fixed := job.Backoff{Kind: job.BackoffFixed, Base: time.Minute}
	second := Held{Queue: "q", Attempt: 2, MaxAttempts: 3, Backoff: fixed}
	last := Held{Queue: "q", Attempt: 3, MaxAttempts: 3, Backoff: fixed}
	cancelled := Held{Queue: "q", Attempt: 1, MaxAttempts: 3, CancelRequested: true}
	letter := Held{Queue: "q", Attempt: 3, MaxAttempts: 3, Letter: true}
	lost := func(attempt int) job.AttemptError {
		return job.AttemptError{Attempt: attempt, Message: job.LeaseExpiredMessage, At: now}
	}
	failed := func(attempt int, msg string) job.AttemptError {
		return job.AttemptError{Attempt: attempt, Message: msg, At: now}
	}
	tests := []struct {
		name string
		got  End
		want End
	}{
		{"ack", Complete(&second), End{State: job.StateCompleted, Attempt: 2}},
		{"ack of a cancelled job", Complete(&cancelled), End{State: job.StateCancelled, Attempt: 1}},
		{"fail retries after the backoff", Fail(&second, &Failure{Message: "boom"}, dlq, now, nil),
			End{State: job.StateRetrying, RunAt: now.Add(time.Minute), Attempt: 2, Record: true, Error: failed(2, "boom"), CutsRun: true}},
		{"fail retries after the worker's delay", Fail(&second, &Failure{RetryAfter: time.Second}, dlq, now, nil),
			End{State: job.StateRetrying, RunAt: now.Add(time.Second), Attempt: 2, Record: true, Error: failed(2, ""), CutsRun: true}},
		{"fail of the last attempt dies into the dead-letter queue", Fail(&last, &Failure{Message: "x"}, dlq, now, nil),
			End{State: job.StateDead, Attempt: 3, Record: true, Error: failed(3, "x"), DeadLetter: "dlq", CutsRun: true}},
		{"fail without retry dies", Fail(&second, &Failure{NoRetry: true}, job.QueueSettings{}, now, nil),
			End{State: job.StateDead, Attempt: 2, Record: true, Error: failed(2, ""), CutsRun: true}},
		{"a copy dies without a copy", Fail(&letter, &Failure{}, dlq, now, nil),
			End{State: job.StateDead, Attempt: 3, Record: true, Error: failed(3, ""), CutsRun: true}},
		{"fail of a cancelled job", Fail(&cancelled, &Failure{}, dlq, now, nil),
			End{State: job.StateCancelled, Attempt: 1, Record: true, Error: failed(1, ""), CutsRun: true}},
		{"release takes the attempt back", Release(&second), End{State: job.StateAvailable, Attempt: 1, CutsRun: true}},
		{"release of a cancelled job", Release(&cancelled), End{State: job.StateCancelled, CutsRun: true}},
		{"expiry makes the job available", Expire(&second, dlq, now),
			End{State: job.StateAvailable, Attempt: 2, Record: true, Error: lost(2), CutsRun: true}},
		{"expiry of the last attempt dies", Expire(&last, dlq, now),
			End{State: job.StateDead, Attempt: 3, Record: true, Error: lost(3), DeadLetter: "dlq", CutsRun: true}},
		{"expiry of a cancelled job", Expire(&cancelled, dlq, now),
			End{State: job.StateCancelled, Attempt: 1, Record: true, Error: lost(1), CutsRun: true}},
		{"past the wait", PastWait(0, false, dlq, now), End{State: job.StateDead, Record: true,
			Error: job.AttemptError{Attempt: 1, Message: job.MaxWaitMessage, At: now}, DeadLetter: "dlq"}},
		{"a copy past the wait", PastWait(0, true, dlq, now), End{State: job.StateDead, Record: true,
			Error: job.AttemptError{Attempt: 1, Message: job.MaxWaitMessage, At: now}}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

func TestEndHoldsGroup(t *testing.T) {
	first := Held{Attempt: 1, MaxAttempts: 3, Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second}}
	second := Held{Attempt: 2, MaxAttempts: 3}
	tests := []struct {
		name string
		end  End
		want bool
	}{
		{"a first attempt handed back", Release(&first), false},
		{"a later attempt handed back", Release(&second), true},
		{"a retrying job", Fail(&first, &Failure{}, job.QueueSettings{}, now, nil), true},
		{"an expired lease", Expire(&first, job.QueueSettings{}, now), true},
		{"a completed job", Complete(&first), false},
		{"a dead job", Fail(&first, &Failure{NoRetry: true}, job.QueueSettings{}, now, nil), false},
	}
	for _, tt := range tests {
		if got := tt.end.HoldsGroup(); got != tt.want {
			t.Errorf("%s: HoldsGroup = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBatch(t *testing.T) {
	ids := []string{"a", "b", "a", "c", "b", "c"}
	b := NewBatch(len(ids), func(i int) (string, int64) { return ids[i], int64(i) })
	if b.Len() != len(ids) {
		t.Fatalf("Len = %d, want %d", b.Len(), len(ids))
	}
	if got := b.IDs; len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("IDs = %v, want [a b c]", got)
	}
	if got := b.Pos; got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("Pos = %v, want [0 1 3]", got)
	}
	if got := b.Tokens; got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("Tokens = %v, want [0 1 3]", got)
	}
	for k, id := range b.IDs {
		if got := b.Index(id); got != k {
			t.Errorf("Index(%q) = %d, want %d", id, got, k)
		}
	}
	// a held its lease, b's job is unknown, c's lease is lost.
	first := map[int]error{0: nil, 1: job.ErrNotFound, 3: job.ErrLeaseLost}
	got := map[int]error{}
	b.Repeats(func(pos int) error { return first[pos] }, func(pos int, err error) { got[pos] = err })
	want := map[int]error{2: job.ErrLeaseLost, 4: job.ErrNotFound, 5: job.ErrLeaseLost}
	if len(got) != len(want) {
		t.Fatalf("repeats = %v, want %v", got, want)
	}
	for pos, err := range want {
		if !errors.Is(got[pos], err) {
			t.Errorf("item %d: %v, want %v", pos, got[pos], err)
		}
	}
	if !errors.Is(Miss(true), job.ErrLeaseLost) || !errors.Is(Miss(false), job.ErrNotFound) {
		t.Error("Miss: want ErrLeaseLost for a job that exists, ErrNotFound otherwise")
	}
}

func TestRunReturns(t *testing.T) {
	retrying := End{State: job.StateRetrying, Attempt: 1, CutsRun: true}
	dead := End{State: job.StateDead, Attempt: 3, CutsRun: true}
	cases := []struct {
		name    string
		ordered bool
		group   string
		end     End
		want    bool
	}{
		{"a job that waits again in an ordered group", true, "g", retrying, true},
		{"a released job", true, "g", End{State: job.StateAvailable, CutsRun: true}, true},
		{"a job that fails and dies", true, "g", dead, true},
		{"a job that completes", true, "g", End{State: job.StateCompleted, Attempt: 1}, false},
		{"a queue that is not ordered", false, "g", retrying, false},
		{"a job without a group", true, "", retrying, false},
	}
	for _, c := range cases {
		if got := ReturnsRun(c.ordered, c.group, &c.end); got != c.want {
			t.Errorf("%s: ReturnsRun %v, want %v", c.name, got, c.want)
		}
	}
	if got := RunTail(5, []int64{9, 3, 5, 7}); !slices.Equal(got, []int64{7, 9}) {
		t.Errorf("RunTail(5) = %v, want the later jobs in enqueue order [7 9]", got)
	}
	if got := RunTail(9, []int64{9, 3}); len(got) != 0 {
		t.Errorf("RunTail of the last job = %v, want none", got)
	}
}
