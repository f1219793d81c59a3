package job

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
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

func TestAppendError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var errs []AttemptError
	dropped := 0
	const n = 3*LatestErrors + 7
	for i := 1; i <= n; i++ {
		before := slices.Clone(errs)
		errs, dropped = AppendError(errs, dropped, AttemptError{Attempt: i, Message: fmt.Sprintf("failure %d", i), At: now})
		if len(before) > 0 && !reflect.DeepEqual(before, slices.Clone(before)) {
			t.Fatal("AppendError changed the history it was given")
		}
		if len(errs) > LatestErrors+1 || len(errs)+dropped != i {
			t.Fatalf("after %d errors: %d kept and %d dropped", i, len(errs), dropped)
		}
	}
	if errs[0].Message != "failure 1" || dropped != n-1-LatestErrors {
		t.Fatalf("first %q, %d dropped; want failure 1 and %d dropped", errs[0].Message, dropped, n-1-LatestErrors)
	}
	for k, e := range errs[1:] {
		if want := n - LatestErrors + 1 + k; e.Attempt != want {
			t.Fatalf("kept error %d is of attempt %d, want %d: the latest in order", k+1, e.Attempt, want)
		}
	}
	// The message is kept as ErrorMessage keeps it.
	errs, _ = AppendError(nil, 0, AttemptError{Attempt: 1, Message: "a\x00" + strings.Repeat("x", MaxErrorBytes)})
	if len(errs) != 1 || errs[0].Message != ErrorMessage("a\x00"+strings.Repeat("x", MaxErrorBytes)) {
		t.Fatalf("message kept as %d bytes", len(errs[0].Message))
	}
}

func TestBoundErrorsBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", MaxErrorBytes)
	var errs []AttemptError
	dropped := 0
	for i := 1; i <= 10; i++ {
		errs, dropped = AppendError(errs, dropped, AttemptError{Attempt: i, Message: big})
		size := 0
		for _, e := range errs {
			size += len(e.Message)
		}
		if size > MaxErrorHistoryBytes || len(errs)+dropped != i {
			t.Fatalf("after %d errors: %d bytes in %d kept, %d dropped", i, size, len(errs), dropped)
		}
	}
	if want := MaxErrorHistoryBytes / MaxErrorBytes; len(errs) != want || errs[0].Attempt != 1 || errs[len(errs)-1].Attempt != 10 {
		t.Fatalf("kept %d errors (first of attempt %d, last %d), want %d: the first and the latest that fit",
			len(errs), errs[0].Attempt, errs[len(errs)-1].Attempt, want)
	}
	// A history written before the bounds held is held to them at once.
	long := make([]AttemptError, 100)
	for i := range long {
		long[i] = AttemptError{Attempt: i + 1, Message: "m"}
	}
	kept, dropped := BoundErrors(long, 3)
	if len(kept) != LatestErrors+1 || dropped != 3+100-1-LatestErrors || kept[0].Attempt != 1 || kept[1].Attempt != 100-LatestErrors+1 {
		t.Fatalf("bounded old history: %d kept from attempt %d, %d dropped", len(kept), kept[1].Attempt, dropped)
	}
}

func TestAfterFailure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	fixed := Backoff{Kind: BackoffFixed, Base: 10 * time.Second, Jitter: 0.5}
	half := func() float64 { return 0.5 }
	for _, c := range []struct {
		name      string
		f         Failure
		rnd       func() float64
		want      State
		wantRunAt time.Time
	}{
		{"attempts left: backoff", Failure{Attempt: 1, MaxAttempts: 3, Backoff: fixed}, nil, StateRetrying, now.Add(10 * time.Second)},
		{"backoff with jitter", Failure{Attempt: 1, MaxAttempts: 3, Backoff: fixed}, half, StateRetrying, now.Add(7500 * time.Millisecond)},
		{"retry_after wins over backoff", Failure{Attempt: 2, MaxAttempts: 3, RetryAfter: time.Minute, Backoff: fixed}, half, StateRetrying, now.Add(time.Minute)},
		{"last attempt", Failure{Attempt: 3, MaxAttempts: 3, RetryAfter: time.Minute, Backoff: fixed}, nil, StateDead, time.Time{}},
		{"past the last attempt", Failure{Attempt: 4, MaxAttempts: 3, Backoff: fixed}, nil, StateDead, time.Time{}},
		{"no retry", Failure{Attempt: 1, MaxAttempts: 3, NoRetry: true, Backoff: fixed}, nil, StateDead, time.Time{}},
		{"cancel requested", Failure{CancelRequested: true, Attempt: 1, MaxAttempts: 3, Backoff: fixed}, nil, StateCancelled, time.Time{}},
		{"cancel wins over no retry", Failure{CancelRequested: true, Attempt: 1, MaxAttempts: 3, NoRetry: true}, nil, StateCancelled, time.Time{}},
		{"cancel wins over the last attempt", Failure{CancelRequested: true, Attempt: 3, MaxAttempts: 3}, nil, StateCancelled, time.Time{}},
	} {
		state, runAt := AfterFailure(&c.f, now, c.rnd)
		if state != c.want || !runAt.Equal(c.wantRunAt) {
			t.Errorf("%s: %s at %v, want %s at %v", c.name, state, runAt, c.want, c.wantRunAt)
		}
	}
}

func TestAfterFailureBackoffGrowsWithTheAttempt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	exp := Backoff{Kind: BackoffExponential, Base: time.Second, Max: time.Hour}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 20: time.Hour} {
		f := Failure{Attempt: attempt, MaxAttempts: 25, Backoff: exp}
		if state, runAt := AfterFailure(&f, now, nil); state != StateRetrying || runAt.Sub(now) != want {
			t.Errorf("attempt %d: %s after %v, want retrying after %v", attempt, state, runAt.Sub(now), want)
		}
	}
}

func TestAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name             string
		cancel           bool
		attempt, maxAtts int
		want             State
	}{
		{"attempts left", false, 1, 3, StateAvailable},
		{"last attempt", false, 3, 3, StateDead},
		{"cancel requested", true, 1, 3, StateCancelled},
		{"cancel wins over the last attempt", true, 3, 3, StateCancelled},
	} {
		if got := AfterLeaseExpiry(c.cancel, c.attempt, c.maxAtts); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if LeaseExpiredMessage != "lease expired" {
		t.Errorf("LeaseExpiredMessage = %q: the text is part of the wire format", LeaseExpiredMessage)
	}
}

func TestAfterCompletionAndRelease(t *testing.T) {
	t.Parallel()
	if got := AfterCompletion(false); got != StateCompleted {
		t.Errorf("ack: %s, want completed", got)
	}
	if got := AfterCompletion(true); got != StateCancelled {
		t.Errorf("ack with a cancel requested: %s, want cancelled", got)
	}
	for _, c := range []struct {
		name        string
		cancel      bool
		attempt     int
		want        State
		wantAttempt int
	}{
		{"first hand-out", false, 1, StateAvailable, 0},
		{"later hand-out", false, 4, StateAvailable, 3},
		{"cancel requested", true, 2, StateCancelled, 1},
		{"never below zero", false, 0, StateAvailable, 0},
	} {
		state, attempt := AfterRelease(c.cancel, c.attempt)
		if state != c.want || attempt != c.wantAttempt {
			t.Errorf("%s: %s with attempt %d, want %s with attempt %d", c.name, state, attempt, c.want, c.wantAttempt)
		}
	}
}

func TestRetryable(t *testing.T) {
	t.Parallel()
	want := map[State]bool{StateDead: true, StateCancelled: true, StateRetrying: true, StateScheduled: true}
	for _, s := range append(States, "bogus") {
		if got := s.Retryable(); got != want[s] {
			t.Errorf("%s: retryable %v, want %v", s, got, want[s])
		}
	}
}

func TestPrunePasses(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	week := day.Add(-6 * 24 * time.Hour)
	done := []State{StateCompleted, StateCancelled}
	dead := []State{StateDead}
	for _, c := range []struct {
		name                    string
		completedBefore, deadAt time.Time
		keepCompleted, keepDead int
		want                    []PrunePass
	}{
		{"nothing", time.Time{}, time.Time{}, 0, 0, []PrunePass{}},
		{"every pass, age first", day, week, 10, 20, []PrunePass{
			{States: done, Before: day}, {States: dead, Before: week}, {States: done, Keep: 10}, {States: dead, Keep: 20},
		}},
		{"completed by age only", day, time.Time{}, 0, 0, []PrunePass{{States: done, Before: day}}},
		{"dead by count only", time.Time{}, time.Time{}, 0, 5, []PrunePass{{States: dead, Keep: 5}}},
		{"negative caps are off", time.Time{}, week, -1, -1, []PrunePass{{States: dead, Before: week}}},
	} {
		if got := PrunePasses(c.completedBefore, c.deadAt, c.keepCompleted, c.keepDead); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestPrunePassQuota(t *testing.T) {
	t.Parallel()
	byAge := PrunePass{States: []State{StateDead}, Before: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)}
	byCount := PrunePass{States: []State{StateDead}, Keep: 10}
	for _, c := range []struct {
		name   string
		pass   PrunePass
		have   int64
		budget int
		want   int
	}{
		{"by age: the whole budget", byAge, 0, 500, 500},
		{"by age: no budget left", byAge, 0, 0, 0},
		{"by count: the excess", byCount, 25, 500, 15},
		{"by count: the budget caps the excess", byCount, 2000, 500, 500},
		{"by count: under the cap", byCount, 4, 500, 0},
		{"by count: at the cap", byCount, 10, 500, 0},
	} {
		if got := c.pass.Quota(c.have, c.budget); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if !byAge.ByAge() || byCount.ByAge() {
		t.Errorf("ByAge: %v for a pass by age, %v for a pass by count", byAge.ByAge(), byCount.ByAge())
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	passes := PrunePasses(at, at, 10, 5)
	held := map[State]int64{StateCompleted: 30, StateCancelled: 4, StateDead: 12}
	aged := map[State]int64{StateCompleted: 3, StateCancelled: 1, StateDead: 2} // finished before at
	count := func(states []State) (int64, error) {
		var n int64
		for _, st := range states {
			n += held[st]
		}
		return n, nil
	}
	var calls []string
	del := func(p *PrunePass, n int) (int, error) {
		calls = append(calls, fmt.Sprintf("%v age %v: %d", p.States, p.ByAge(), n))
		deleted := 0
		for _, st := range p.States {
			take := held[st]
			if p.ByAge() {
				take = aged[st]
			}
			take = min(take, int64(n-deleted))
			held[st] -= take
			aged[st] -= min(aged[st], take)
			deleted += int(take)
		}
		return deleted, nil
	}
	total, err := Prune(passes, 40, count, del)
	// By age: 4 completed or cancelled and 2 dead, each pass with what is
	// left of the budget; by count: the 30 completed or cancelled left
	// beyond 10, and the 10 dead left beyond 5.
	want := []string{
		"[completed cancelled] age true: 40", "[dead] age true: 36",
		"[completed cancelled] age false: 20", "[dead] age false: 5",
	}
	if err != nil || total != 6+20+5 || !slices.Equal(calls, want) {
		t.Errorf("Prune: %d, %v, calls %q; want %d and %q", total, err, calls, 6+20+5, want)
	}
	calls = nil
	held = map[State]int64{StateCompleted: 30, StateDead: 12}
	if total, err := Prune(PrunePasses(time.Time{}, time.Time{}, 10, 5), 25, count, del); total != 25 || err != nil ||
		!slices.Equal(calls, []string{"[completed cancelled] age false: 20", "[dead] age false: 5"}) {
		t.Errorf("a budget the passes share: %d, %v, calls %q", total, err, calls)
	}
	boom := errors.New("boom")
	failing := func([]State) (int64, error) { return 0, boom }
	if n, err := Prune(PrunePasses(time.Time{}, time.Time{}, 1, 0), 10, failing, del); n != 0 || !errors.Is(err, boom) {
		t.Errorf("a failing count: %d, %v", n, err)
	}
	if n, err := Prune(passes, 0, count, del); n != 0 || err != nil {
		t.Errorf("no budget: %d, %v", n, err)
	}
}

func TestLimitsCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l     Limits
		field string
	}{
		{Limits{}, ""},
		{Limits{Rate: Rate{Limit: 10, Period: time.Second}, MaxActive: 5, GroupRate: Rate{Limit: 1, Period: time.Millisecond}, GroupMaxActive: 1}, ""},
		{Limits{Rate: Rate{Limit: 0, Period: time.Second}}, "rate.limit"},
		{Limits{Rate: Rate{Limit: -1, Period: time.Second}}, "rate.limit"},
		{Limits{Rate: Rate{Limit: MaxRateLimit + 1, Period: time.Second}}, "rate.limit"},
		{Limits{Rate: Rate{Limit: 5}}, "rate.period_ms"},
		{Limits{Rate: Rate{Limit: 5, Period: time.Microsecond}}, "rate.period_ms"},
		{Limits{Rate: Rate{Limit: 5, Period: 1500 * time.Microsecond}}, "rate.period_ms"},
		{Limits{GroupRate: Rate{Limit: 5, Period: 25 * time.Hour}}, "group_rate.period_ms"},
		{Limits{MaxActive: -2}, "max_active"},
		{Limits{GroupMaxActive: MaxActiveLimit + 1}, "group_max_active"},
		{Limits{Ordered: true}, ""},
		{Limits{Ordered: true, GroupMaxActive: 1}, ""},
		{Limits{Ordered: true, GroupMaxActive: 2}, "group_max_active"},
	} {
		err := c.l.Check()
		var in *InputError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.l, err)
		case c.field != "" && (!errors.As(err, &in) || in.Field != c.field):
			t.Errorf("%+v: %v, want an input error on %s", c.l, err, c.field)
		}
	}
}

// An ordered queue is grouped, not zero, and runs each group one job at a
// time.
func TestOrderedLimits(t *testing.T) {
	t.Parallel()
	l := Limits{Ordered: true}
	if l.IsZero() || !l.Grouped() || l.Normalized().GroupMaxActive != 1 {
		t.Fatalf("ordered limits: zero %v, grouped %v, normalized %+v", l.IsZero(), l.Grouped(), l.Normalized())
	}
	if n := (Limits{GroupMaxActive: 3}).Normalized(); n.GroupMaxActive != 3 {
		t.Fatalf("normalized unordered limits: %+v", n)
	}
}

// A job holds its ordered group from its first hand-out until it
// finishes, whatever state it waits in meanwhile.
func TestHoldsGroup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s       State
		attempt int
		want    bool
	}{
		{StateAvailable, 0, false},
		{StateScheduled, 0, false},
		{StateActive, 1, true},
		{StateRetrying, 1, true},
		{StateAvailable, 2, true},
		{StateCompleted, 1, false},
		{StateDead, 3, false},
		{StateCancelled, 1, false},
	} {
		if got := HoldsGroup(c.s, c.attempt); got != c.want {
			t.Errorf("HoldsGroup(%s, %d) = %v, want %v", c.s, c.attempt, got, c.want)
		}
	}
}

// A rate of N per period lets N starts into any window of that length,
// and says when the next may start.
func TestStartLogHoldsTheRate(t *testing.T) {
	t.Parallel()
	r := Rate{Limit: 3, Period: 10 * time.Second}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var log StartLog
	if room, _ := log.Room(r, now); room != 3 {
		t.Fatalf("empty log: room %d", room)
	}
	log = log.Add(r, now, 2)
	log = log.Add(r, now.Add(4*time.Second), 1)
	room, next := log.Room(r, now.Add(5*time.Second))
	if room != 0 || !next.Equal(now.Add(10*time.Second)) {
		t.Fatalf("full window: room %d next %v, want 0 and %v", room, next, now.Add(10*time.Second))
	}
	if room, _ := log.Room(r, now.Add(10*time.Second)); room != 2 {
		t.Fatalf("after the first two left the window: room %d, want 2", room)
	}
	log = log.Add(r, now.Add(10*time.Second), 2)
	if len(log) != 3 {
		t.Fatalf("log keeps %d starts, want the latest 3", len(log))
	}
	if room, next := log.Room(r, now.Add(11*time.Second)); room != 0 || !next.Equal(now.Add(14*time.Second)) {
		t.Fatalf("room %d next %v", room, next)
	}
	// Over any window of 10 s, never more than 3 starts: walk a second at
	// a time taking what the log allows.
	log = nil
	var starts []time.Time
	for s := 0; s < 60; s++ {
		at := now.Add(time.Duration(s) * time.Second)
		room, _ := log.Room(r, at)
		log = log.Add(r, at, room)
		for range room {
			starts = append(starts, at)
		}
	}
	for i := range starts {
		in := 0
		for _, s := range starts {
			if !s.Before(starts[i]) && s.Before(starts[i].Add(r.Period)) {
				in++
			}
		}
		if in > r.Limit {
			t.Fatalf("%d starts in the 10 s from %v", in, starts[i])
		}
	}
	if len(starts) != 18 {
		t.Fatalf("%d starts in 60 s at 3 per 10 s, want 18", len(starts))
	}
	if room, _ := (StartLog(nil)).Room(Rate{}, now); room != -1 {
		t.Fatalf("no rate: room %d, want -1", room)
	}
}

// A log keeps only the starts that still count, and a clock that steps
// back cannot make room.
func TestStartLogStaysSmall(t *testing.T) {
	t.Parallel()
	r := Rate{Limit: 1000, Period: time.Second}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var log StartLog
	for i := range 100 {
		log = log.Add(r, now.Add(time.Duration(i)*100*time.Millisecond), 5)
	}
	// At 9.9 s the window is (8.9 s, 9.9 s]: the starts from 9.0 s on.
	if len(log) != 50 {
		t.Fatalf("log holds %d starts, want the 50 of the last second", len(log))
	}
	if log.Idle(r, now.Add(10*time.Second)) {
		t.Fatal("idle while starts are in the window")
	}
	if !log.Idle(r, now.Add(11*time.Second)) {
		t.Fatal("not idle a whole period after the last start")
	}
	one := Rate{Limit: 1, Period: time.Minute}
	log = StartLog(nil).Add(one, now, 1)
	log = log.Add(one, now.Add(-time.Hour), 1) // the clock stepped back
	if room, next := log.Room(one, now.Add(30*time.Second)); room != 0 || !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("after a step back: room %d next %v, want 0 and %v", room, next, now.Add(time.Minute))
	}
}
