package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func patchTests() []group {
	return []group{
		{"QueuePatchSettings", []test{
			{"SetsClearsAndKeepsTheRest", testPatchSettings},
			{"RefusalChangesNothing", testPatchSettingsRefused},
			{"ConcurrentPatchesOfDifferentFieldsAllSurvive", testPatchSettingsConcurrent},
		}},
		{"QueuePatchLimits", []test{
			{"SetsClearsAndKeepsTheRest", testPatchLimits},
			{"RefusalChangesNothing", testPatchLimitsRefused},
			{"ConcurrentPatchesOfDifferentFieldsAllSurvive", testPatchLimitsConcurrent},
		}},
	}
}

// patchSettings patches queue's settings, failing the test on an error,
// and checks that what the store returns is what the queue then has.
func (b *bundle) patchSettings(queue string, p job.SettingsPatch) job.QueueSettings {
	b.t.Helper()
	st, err := b.s.QueuePatchSettings(b.ctx, queue, p)
	if err != nil {
		b.t.Fatalf("patch settings of %s: %v", queue, err)
	}
	if q := b.queue(queue); q.Settings != st {
		b.t.Fatalf("patch of %s returned %v, the queue has %v", queue, st, q.Settings)
	}
	return st
}

// patchLimits is patchSettings for limits.
func (b *bundle) patchLimits(queue string, p job.LimitsPatch) job.Limits {
	b.t.Helper()
	l, err := b.s.QueuePatchLimits(b.ctx, queue, p)
	if err != nil {
		b.t.Fatalf("patch limits of %s: %v", queue, err)
	}
	if q := b.queue(queue); q.Limits != l {
		b.t.Fatalf("patch of %s returned %v, the queue has %v", queue, l, q.Limits)
	}
	return l
}

// wantInputError fails the test unless err is an *job.InputError on
// field.
func (b *bundle) wantInputError(what string, err error, field string) {
	b.t.Helper()
	var in *job.InputError
	if !errors.As(err, &in) || in.Field != field {
		b.t.Fatalf("%s: %v, want an InputError on %s", what, err, field)
	}
}

// A patch changes the fields it sets or clears and keeps every other
// one, creating an unknown queue; the settings hold for the jobs enqueued
// after it (QueueDefaults) and for the jobs already waiting (the new
// maximum wait).
func testPatchSettings(b *bundle) {
	b.settle("q", job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Hour})
	got := b.patchSettings("q", job.SettingsPatch{DefaultLease: job.Set(5 * time.Minute)})
	want := job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Hour, DefaultLease: 5 * time.Minute}
	if got != want {
		b.t.Fatalf("after setting the lease: %v, want %v", got, want)
	}
	got = b.patchSettings("q", job.SettingsPatch{MaxWait: job.Clear[time.Duration](), DefaultMaxAttempts: job.Set(4)})
	want = job.QueueSettings{DeadLetterQueue: "q-dlq", DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 4}
	if got != want {
		b.t.Fatalf("after clearing the wait: %v, want %v", got, want)
	}
	if d, err := b.s.QueueDefaults(b.ctx, "q"); err != nil || d.Settings != want {
		b.t.Fatalf("defaults after the patches: %+v, %v, want settings %v", d, err, want)
	}
	if got = b.patchSettings("q", job.SettingsPatch{}); got != want {
		b.t.Fatalf("after an empty patch: %v, want %v", got, want)
	}

	// A new maximum wait holds for the jobs already waiting.
	b.add(newJob("w"))
	b.patchSettings("w", job.SettingsPatch{MaxWait: job.Set(time.Minute)})
	res, err := b.s.JobExpireWaiting(b.ctx, at(2*time.Minute), 100)
	if err != nil || res.Count != 1 {
		b.t.Fatalf("expire waiting after a patched wait: %+v, %v, want 1 killed", res, err)
	}

	got = b.patchSettings("fresh", job.SettingsPatch{DeadLetterQueue: job.Set("fresh-dlq")})
	if got != (job.QueueSettings{DeadLetterQueue: "fresh-dlq"}) {
		b.t.Fatalf("patch of an unknown queue: %v", got)
	}
}

// A patch that job.SettingsPatch.Merge refuses returns its InputError and
// leaves the settings, and an unknown queue's absence, as they were.
func testPatchSettingsRefused(b *bundle) {
	before := job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Hour}
	b.settle("q", before)
	_, err := b.s.QueuePatchSettings(b.ctx, "q", job.SettingsPatch{DefaultLease: job.Set(time.Minute), DeadLetterQueue: job.Set("q")})
	b.wantInputError("dead-letter queue of itself", err, "dead_letter_queue")
	_, err = b.s.QueuePatchSettings(b.ctx, "q", job.SettingsPatch{MaxWait: job.Clear[time.Duration](), DefaultMaxAttempts: job.Set(0)})
	b.wantInputError("zero attempts", err, "default_max_attempts")
	if q := b.queue("q"); q.Settings != before {
		b.t.Fatalf("settings after refused patches: %v, want %v", q.Settings, before)
	}
	_, err = b.s.QueuePatchSettings(b.ctx, "unknown", job.SettingsPatch{DefaultDelay: job.Set(-time.Second)})
	b.wantInputError("negative delay", err, "default_delay_ms")
	if _, err := b.s.QueueGet(b.ctx, "unknown"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a refused patch: %v, want not found", err)
	}
}

// nodes are the stores the concurrent checks spread their calls over:
// the bundle's and, where the harness can open it, a second node on the
// same data.
func (b *bundle) nodes() []store.Store {
	if b.h.Node == nil {
		return []store.Store{b.s}
	}
	return []store.Store{b.s, b.h.Node(b.t, b.s)}
}

// race runs each of calls at once, round after round, each on a node in
// turn, failing the test on the first error; after each round check
// looks at the outcome.
func (b *bundle) race(rounds int, calls []func(s store.Store, round int) error, check func(round int)) {
	b.t.Helper()
	nodes := b.nodes()
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, len(calls))
		start := make(chan struct{})
		for i, call := range calls {
			wg.Go(func() {
				<-start
				if err := call(nodes[(i+round)%len(nodes)], round); err != nil {
					errs <- fmt.Errorf("call %d of round %d: %w", i, round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			b.t.Fatal(err)
		}
		check(round)
	}
}

// Patches of different fields sent at once, from every node, all
// survive: none reads the settings before another's write and writes
// them back without it.
func testPatchSettingsConcurrent(b *bundle) {
	patch := func(p func(round int) job.SettingsPatch) func(store.Store, int) error {
		return func(s store.Store, round int) error {
			_, err := s.QueuePatchSettings(b.ctx, "q", p(round))
			return err
		}
	}
	wantOf := func(round int) job.QueueSettings {
		return job.QueueSettings{DeadLetterQueue: fmt.Sprintf("dlq-%d", round), MaxWait: time.Duration(round+1) * time.Minute,
			DefaultLease: time.Duration(round+1) * time.Second, DefaultMaxAttempts: round + 1,
			DefaultDelay: time.Duration(round+1) * time.Millisecond}
	}
	b.race(12, []func(store.Store, int) error{
		patch(func(r int) job.SettingsPatch {
			return job.SettingsPatch{DeadLetterQueue: job.Set(wantOf(r).DeadLetterQueue)}
		}),
		patch(func(r int) job.SettingsPatch { return job.SettingsPatch{MaxWait: job.Set(wantOf(r).MaxWait)} }),
		patch(func(r int) job.SettingsPatch { return job.SettingsPatch{DefaultLease: job.Set(wantOf(r).DefaultLease)} }),
		patch(func(r int) job.SettingsPatch {
			return job.SettingsPatch{DefaultMaxAttempts: job.Set(wantOf(r).DefaultMaxAttempts)}
		}),
		patch(func(r int) job.SettingsPatch { return job.SettingsPatch{DefaultDelay: job.Set(wantOf(r).DefaultDelay)} }),
	}, func(round int) {
		if got := b.queue("q").Settings; got != wantOf(round) {
			b.t.Fatalf("settings after round %d of concurrent patches: %v, want %v", round, got, wantOf(round))
		}
	})
}

// A limits patch changes the fields it sets or clears, merges a rate
// member by member and keeps every other field.
func testPatchLimits(b *bundle) {
	if err := b.s.QueueSetLimits(b.ctx, "q", job.Limits{Rate: job.Rate{Limit: 10, Period: time.Second}, MaxActive: 5}); err != nil {
		b.t.Fatalf("set limits: %v", err)
	}
	got := b.patchLimits("q", job.LimitsPatch{GroupMaxActive: job.Set(2)})
	want := job.Limits{Rate: job.Rate{Limit: 10, Period: time.Second}, MaxActive: 5, GroupMaxActive: 2}
	if got != want {
		b.t.Fatalf("after setting the group cap: %v, want %v", got, want)
	}
	got = b.patchLimits("q", job.LimitsPatch{Rate: job.Set(job.RatePatch{Limit: job.Set(20)}), MaxActive: job.Clear[int]()})
	want = job.Limits{Rate: job.Rate{Limit: 20, Period: time.Second}, GroupMaxActive: 2}
	if got != want {
		b.t.Fatalf("after merging the rate: %v, want %v", got, want)
	}
	got = b.patchLimits("q", job.LimitsPatch{Rate: job.Clear[job.RatePatch](), GroupMaxActive: job.Clear[int](), Ordered: job.Set(true)})
	want = job.Limits{GroupMaxActive: 1, Ordered: true}
	if got != want {
		b.t.Fatalf("after ordering: %v, want %v", got, want)
	}
	got = b.patchLimits("fresh", job.LimitsPatch{MaxActive: job.Set(3)})
	if got != (job.Limits{MaxActive: 3}) {
		b.t.Fatalf("patch of an unknown queue: %v", got)
	}
}

// A limits patch that job.LimitsPatch.Merge refuses returns its
// InputError and leaves the limits, and an unknown queue's absence, as
// they were.
func testPatchLimitsRefused(b *bundle) {
	before := job.Limits{MaxActive: 5, GroupMaxActive: 3}
	if err := b.s.QueueSetLimits(b.ctx, "q", before); err != nil {
		b.t.Fatalf("set limits: %v", err)
	}
	_, err := b.s.QueuePatchLimits(b.ctx, "q", job.LimitsPatch{MaxActive: job.Clear[int](), Ordered: job.Set(true)})
	b.wantInputError("ordered with a group cap of 3", err, "group_max_active")
	_, err = b.s.QueuePatchLimits(b.ctx, "q", job.LimitsPatch{GroupRate: job.Set(job.RatePatch{Limit: job.Set(5)})})
	b.wantInputError("a rate without its period", err, "group_rate.period_ms")
	if q := b.queue("q"); q.Limits != before {
		b.t.Fatalf("limits after refused patches: %v, want %v", q.Limits, before)
	}
	_, err = b.s.QueuePatchLimits(b.ctx, "unknown", job.LimitsPatch{MaxActive: job.Set(0)})
	b.wantInputError("a zero cap", err, "max_active")
	if _, err := b.s.QueueGet(b.ctx, "unknown"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a refused patch: %v, want not found", err)
	}
}

// Limits patches of different fields sent at once, from every node, all
// survive.
func testPatchLimitsConcurrent(b *bundle) {
	patch := func(p func(round int) job.LimitsPatch) func(store.Store, int) error {
		return func(s store.Store, round int) error {
			_, err := s.QueuePatchLimits(b.ctx, "q", p(round))
			return err
		}
	}
	wantOf := func(round int) job.Limits {
		return job.Limits{Rate: job.Rate{Limit: round + 1, Period: time.Second}, MaxActive: round + 10,
			GroupRate: job.Rate{Limit: round + 2, Period: time.Minute}, GroupMaxActive: round + 20}
	}
	rate := func(r job.Rate) job.Change[job.RatePatch] {
		return job.Set(job.RatePatch{Limit: job.Set(r.Limit), Period: job.Set(r.Period)})
	}
	b.race(12, []func(store.Store, int) error{
		patch(func(r int) job.LimitsPatch { return job.LimitsPatch{Rate: rate(wantOf(r).Rate)} }),
		patch(func(r int) job.LimitsPatch { return job.LimitsPatch{MaxActive: job.Set(wantOf(r).MaxActive)} }),
		patch(func(r int) job.LimitsPatch { return job.LimitsPatch{GroupRate: rate(wantOf(r).GroupRate)} }),
		patch(func(r int) job.LimitsPatch { return job.LimitsPatch{GroupMaxActive: job.Set(wantOf(r).GroupMaxActive)} }),
	}, func(round int) {
		if got := b.queue("q").Limits; got != wantOf(round) {
			b.t.Fatalf("limits after round %d of concurrent patches: %v, want %v", round, got, wantOf(round))
		}
	})
}
