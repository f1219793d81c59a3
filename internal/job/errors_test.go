package job

import (
	"errors"
	"fmt"
	"testing"
)

func TestItemErrorMatchesItsSentinel(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("transact: %w", &ItemError{Field: MissField("ack[2]", ErrLeaseLost), Err: ErrLeaseLost})
	var item *ItemError
	if !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) || !errors.As(err, &item) || item.Field != "ack[2].token" {
		t.Fatalf("%v: want an ItemError on ack[2].token matching ErrLeaseLost only", err)
	}
	if f := MissField("fail[0]", ErrNotFound); f != "fail[0].id" {
		t.Errorf("MissField of a missing job: %q, want fail[0].id", f)
	}
}

func TestRenameItems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err   error
		field string // of the renamed error, "" when it must come back as it was
	}{
		{fmt.Errorf("insert: %w", &IDTakenError{Field: "jobs[3].id"}), "enqueue[3].id"},
		{Invalid("jobs[0].durability", "no"), "enqueue[0].durability"},
		{&ItemError{Field: "jobs[1].token", Err: ErrLeaseLost}, "enqueue[1].token"},
		{Invalid("jobs", "mixed"), "enqueue"},
		{Invalid("jobsx[0].id", "other list"), ""},
		{Invalid("ack[0].id", "other list"), ""},
		{ErrNotFound, ""},
	}
	for _, tc := range cases {
		got := RenameItems(tc.err, "jobs", "enqueue")
		if tc.field == "" {
			if got != tc.err {
				t.Errorf("%v: renamed to %v, want it as it was", tc.err, got)
			}
			continue
		}
		var in *InputError
		var taken *IDTakenError
		var item *ItemError
		field := ""
		switch {
		case errors.As(got, &in):
			field = in.Field
		case errors.As(got, &taken):
			field = taken.Field
		case errors.As(got, &item):
			field = item.Field
			if !errors.Is(got, item.Err) {
				t.Errorf("%v: lost its sentinel", got)
			}
		}
		if field != tc.field {
			t.Errorf("%v: renamed to %v (field %q), want field %q", tc.err, got, field, tc.field)
		}
	}
}
