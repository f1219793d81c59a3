package job

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDuplicateByID(t *testing.T) {
	t.Parallel()
	existing := &Job{ID: "x", Queue: "a"}
	if err := DuplicateByID(existing, "a", "id"); err != nil {
		t.Errorf("same queue: %v, want a duplicate", err)
	}
	err := DuplicateByID(existing, "b", "jobs[2].id")
	var taken *IDTakenError
	if !errors.Is(err, ErrIDTaken) || !errors.As(err, &taken) || taken.Field != "jobs[2].id" {
		t.Fatalf("other queue: %v, want an IDTakenError on jobs[2].id", err)
	}
	if strings.Contains(err.Error(), "a") && strings.Contains(err.Error(), `"a"`) {
		t.Errorf("the error names the other job's queue: %v", err)
	}
}

func TestUniqueConflict(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		state     State
		age       time.Duration
		uniqueFor time.Duration
		want      bool
	}{
		{"pending, no window", StateAvailable, time.Hour, 0, true},
		{"active, no window", StateActive, time.Hour, 0, true},
		{"retrying, no window", StateRetrying, time.Hour, 0, true},
		{"completed, no window", StateCompleted, time.Second, 0, false},
		{"cancelled, no window", StateCancelled, time.Second, 0, false},
		{"completed within the window", StateCompleted, time.Minute, time.Hour, true},
		{"dead within the window", StateDead, time.Minute, time.Hour, true},
		{"cancelled within the window", StateCancelled, time.Minute, time.Hour, false},
		{"pending past the window", StateAvailable, 2 * time.Hour, time.Hour, false},
		{"exactly at the window's start", StateAvailable, time.Hour, time.Hour, false},
	} {
		newest := &Job{State: c.state, CreatedAt: now.Add(-c.age)}
		if got := UniqueConflict(newest, c.uniqueFor, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string
	}{
		{"plain", "boom", "boom"},
		{"NUL", "a\x00b", "a\uFFFDb"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"empty", "", ""},
	} {
		if got := ErrorMessage(c.in); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	long := strings.Repeat("é", MaxErrorBytes) // 2 bytes each
	for _, s := range []string{long, "x" + long, strings.Repeat("x", MaxErrorBytes+1)} {
		got := ErrorMessage(s)
		if len(got) > MaxErrorBytes || len(got) < MaxErrorBytes-3 || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Errorf("cut of %d bytes: %d bytes, valid %v", len(s), len(got), utf8.ValidString(got))
		}
	}
}
