package job

import (
	"sort"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	exp := Backoff{Kind: BackoffExponential, Base: time.Second, Max: 10 * time.Second}
	fixed := Backoff{Kind: BackoffFixed, Base: 3 * time.Second, Max: time.Hour}
	cases := []struct {
		name    string
		b       Backoff
		attempt int
		want    time.Duration
	}{
		{"exponential first", exp, 1, time.Second},
		{"exponential second", exp, 2, 2 * time.Second},
		{"exponential fourth", exp, 4, 8 * time.Second},
		{"exponential capped", exp, 5, 10 * time.Second},
		{"exponential huge attempt stays capped", exp, 10_000, 10 * time.Second},
		{"attempt zero treated as first", exp, 0, time.Second},
		{"fixed", fixed, 7, 3 * time.Second},
		{"fixed capped by max", Backoff{Kind: BackoffFixed, Base: time.Minute, Max: time.Second}, 1, time.Second},
	}
	for _, tc := range cases {
		if got := tc.b.Delay(tc.attempt, nil); got != tc.want {
			t.Errorf("%s: Delay(%d) = %v, want %v", tc.name, tc.attempt, got, tc.want)
		}
	}
}

func TestBackoffJitterStaysInRange(t *testing.T) {
	t.Parallel()
	b := Backoff{Kind: BackoffFixed, Base: 10 * time.Second, Jitter: 0.5}
	for _, r := range []float64{0, 0.25, 0.999} {
		got := b.Delay(1, func() float64 { return r })
		if got > 10*time.Second || got < 5*time.Second {
			t.Errorf("jitter %v gave %v, want within [5s,10s]", r, got)
		}
	}
	if b.Delay(1, func() float64 { return 0.5 }) != 7500*time.Millisecond {
		t.Errorf("jitter 0.5 of 0.5 should take a quarter off")
	}
}

func TestNewIDSortsByTimeAndIsValid(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewID(base.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 26 || !ValidName(id) {
			t.Fatalf("id %q is not a valid 26-character name", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids made at increasing times do not sort in that order")
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	long := make([]byte, MaxNameLength+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, want := range map[string]bool{
		"emails": true, "a": true, "Q1.high:v2-x_y": true, string(long[:MaxNameLength]): true,
		"": false, "-lead": false, "has space": false, "slash/": false, "é": false, string(long): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestStatePredicates(t *testing.T) {
	t.Parallel()
	for _, s := range States {
		if !s.Valid() {
			t.Errorf("%s should be valid", s)
		}
		if s.Final() == s.Pending() {
			t.Errorf("%s must be exactly one of final and pending", s)
		}
	}
	if State("bogus").Valid() {
		t.Error("bogus state accepted")
	}
}
