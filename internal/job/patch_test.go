package job

import (
	"errors"
	"testing"
	"time"
)

func TestSettingsPatchMerge(t *testing.T) {
	t.Parallel()
	cur := QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Hour, DefaultLease: time.Minute}
	for _, c := range []struct {
		name  string
		p     SettingsPatch
		want  QueueSettings
		field string // "" when valid
	}{
		{"empty keeps all", SettingsPatch{}, cur, ""},
		{"set one keeps the others", SettingsPatch{DefaultLease: Set(5 * time.Minute)},
			QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Hour, DefaultLease: 5 * time.Minute}, ""},
		{"set a new field", SettingsPatch{DefaultMaxAttempts: Set(3), DefaultDelay: Set(time.Second)},
			QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Hour, DefaultLease: time.Minute, DefaultMaxAttempts: 3, DefaultDelay: time.Second}, ""},
		{"clear one keeps the others", SettingsPatch{MaxWait: Clear[time.Duration]()},
			QueueSettings{DeadLetterQueue: "orders-dlq", DefaultLease: time.Minute}, ""},
		{"clear an unset field", SettingsPatch{DefaultDelay: Clear[time.Duration]()}, cur, ""},
		{"clear all", SettingsPatch{DeadLetterQueue: Clear[string](), MaxWait: Clear[time.Duration](), DefaultLease: Clear[time.Duration]()},
			QueueSettings{}, ""},
		{"set and clear", SettingsPatch{DeadLetterQueue: Set("other-dlq"), DefaultLease: Clear[time.Duration]()},
			QueueSettings{DeadLetterQueue: "other-dlq", MaxWait: time.Hour}, ""},
		{"dead letter to itself", SettingsPatch{DeadLetterQueue: Set("orders")}, cur, "dead_letter_queue"},
		{"dead letter not a name", SettingsPatch{DeadLetterQueue: Set("bad name")}, cur, "dead_letter_queue"},
		{"dead letter empty", SettingsPatch{DeadLetterQueue: Set("")}, cur, "dead_letter_queue"},
		{"zero wait", SettingsPatch{MaxWait: Set(time.Duration(0))}, cur, "max_wait_ms"},
		{"lease too short", SettingsPatch{DefaultLease: Set(MinLease - time.Millisecond)}, cur, "default_lease_ms"},
		{"zero lease", SettingsPatch{DefaultLease: Set(time.Duration(0))}, cur, "default_lease_ms"},
		{"zero attempts", SettingsPatch{DefaultMaxAttempts: Set(0)}, cur, "default_max_attempts"},
		{"too many attempts", SettingsPatch{DefaultMaxAttempts: Set(MaxAttempts + 1)}, cur, "default_max_attempts"},
		{"zero delay", SettingsPatch{DefaultDelay: Set(time.Duration(0))}, cur, "default_delay_ms"},
		{"one bad field refuses the good one", SettingsPatch{DefaultLease: Set(2 * time.Minute), DefaultDelay: Set(MaxDelay + time.Millisecond)},
			cur, "default_delay_ms"},
	} {
		got, err := c.p.Merge("orders", cur)
		checkMerge(t, c.name, got, err, c.want, c.field)
	}
}

// A merged result that the queue may not have is refused even when the
// patch alone names nothing wrong: the stored settings and the patch are
// checked together.
func TestSettingsPatchMergeChecksTheResult(t *testing.T) {
	t.Parallel()
	cur := QueueSettings{DeadLetterQueue: "orders"} // not valid for queue orders
	_, err := SettingsPatch{DefaultLease: Set(time.Minute)}.Merge("orders", cur)
	var in *InputError
	if !errors.As(err, &in) || in.Field != "dead_letter_queue" {
		t.Fatalf("got %v, want an InputError on dead_letter_queue", err)
	}
}

func TestLimitsPatchMerge(t *testing.T) {
	t.Parallel()
	cur := Limits{Rate: Rate{Limit: 10, Period: time.Second}, MaxActive: 5}
	for _, c := range []struct {
		name  string
		cur   Limits
		p     LimitsPatch
		want  Limits
		field string // "" when valid
	}{
		{"empty keeps all", cur, LimitsPatch{}, cur, ""},
		{"set one keeps the others", cur, LimitsPatch{GroupMaxActive: Set(2)},
			Limits{Rate: Rate{Limit: 10, Period: time.Second}, MaxActive: 5, GroupMaxActive: 2}, ""},
		{"clear one keeps the others", cur, LimitsPatch{MaxActive: Clear[int]()},
			Limits{Rate: Rate{Limit: 10, Period: time.Second}}, ""},
		{"clear a rate", cur, LimitsPatch{Rate: Clear[RatePatch]()}, Limits{MaxActive: 5}, ""},
		{"merge a rate member", cur, LimitsPatch{Rate: Set(RatePatch{Limit: Set(20)})},
			Limits{Rate: Rate{Limit: 20, Period: time.Second}, MaxActive: 5}, ""},
		{"set a whole rate", cur, LimitsPatch{GroupRate: Set(RatePatch{Limit: Set(1), Period: Set(time.Minute)})},
			Limits{Rate: Rate{Limit: 10, Period: time.Second}, MaxActive: 5, GroupRate: Rate{Limit: 1, Period: time.Minute}}, ""},
		{"a new rate without its period", cur, LimitsPatch{GroupRate: Set(RatePatch{Limit: Set(1)})}, cur, "group_rate.period_ms"},
		{"a rate member cleared", cur, LimitsPatch{Rate: Set(RatePatch{Period: Clear[time.Duration]()})}, cur, "rate.period_ms"},
		{"an empty new rate", cur, LimitsPatch{GroupRate: Set(RatePatch{})}, cur, "group_rate.limit"},
		{"a zero rate limit", cur, LimitsPatch{Rate: Set(RatePatch{Limit: Set(0)})}, cur, "rate.limit"},
		{"a rate limit too high", cur, LimitsPatch{Rate: Set(RatePatch{Limit: Set(MaxRateLimit + 1)})}, cur, "rate.limit"},
		{"a zero cap", cur, LimitsPatch{MaxActive: Set(0)}, cur, "max_active"},
		{"a negative cap", cur, LimitsPatch{GroupMaxActive: Set(-1)}, cur, "group_max_active"},
		{"ordered normalizes", cur, LimitsPatch{Ordered: Set(true)},
			Limits{Rate: Rate{Limit: 10, Period: time.Second}, MaxActive: 5, GroupMaxActive: 1, Ordered: true}, ""},
		{"ordered with a group cap above 1", Limits{GroupMaxActive: 3}, LimitsPatch{Ordered: Set(true)},
			Limits{GroupMaxActive: 3}, "group_max_active"},
		{"ordered false clears", Limits{Ordered: true, GroupMaxActive: 1}, LimitsPatch{Ordered: Set(false), GroupMaxActive: Clear[int]()},
			Limits{}, ""},
		{"unordered keeps the cap it showed", Limits{Ordered: true, GroupMaxActive: 1}, LimitsPatch{Ordered: Clear[bool]()},
			Limits{GroupMaxActive: 1}, ""},
	} {
		got, err := c.p.Merge(c.cur)
		checkMerge(t, c.name, got, err, c.want, c.field)
	}
}

// Patches of different fields commute: applied one after the other in
// either order they give the same settings, the property that lets two
// concurrent patches both survive once a store serializes them.
func TestPatchesOfDifferentFieldsCommute(t *testing.T) {
	t.Parallel()
	a := SettingsPatch{DeadLetterQueue: Set("dlq")}
	b := SettingsPatch{DefaultLease: Set(time.Minute), MaxWait: Clear[time.Duration]()}
	cur := QueueSettings{MaxWait: time.Hour}
	ab, _ := a.Merge("q", cur)
	ab, _ = b.Merge("q", ab)
	ba, _ := b.Merge("q", cur)
	ba, _ = a.Merge("q", ba)
	want := QueueSettings{DeadLetterQueue: "dlq", DefaultLease: time.Minute}
	if ab != want || ba != want {
		t.Fatalf("a then b %v, b then a %v, want %v", ab, ba, want)
	}
}

// checkMerge fails t unless a merge named name gave want, or, with field
// set, an InputError on field.
func checkMerge[T comparable](t *testing.T, name string, got T, err error, want T, field string) {
	t.Helper()
	var in *InputError
	switch {
	case field == "" && err != nil:
		t.Errorf("%s: %v, want valid", name, err)
	case field != "" && (!errors.As(err, &in) || in.Field != field):
		t.Errorf("%s: %v, want an InputError on %s", name, err, field)
	case got != want:
		t.Errorf("%s: got %v, want %v", name, got, want)
	}
}
