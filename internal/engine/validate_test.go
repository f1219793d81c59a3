package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newTestEngine() *Engine { return New(nil, Config{Clock: fixedClock{testNow}}) }

func prepare(t *testing.T, req EnqueueRequest) (store.JobInsertParams, error) {
	t.Helper()
	var p store.JobInsertParams
	if err := newTestEngine().prepare(&req, &p, testNow, func(s string) string { return s }); err != nil {
		return p, err
	}
	applyDefaults(&p, job.QueueSettings{}, testNow)
	return p, nil
}

func ptr[T any](v T) *T { return &v }

func TestPrepareAppliesDefaults(t *testing.T) {
	t.Parallel()
	p, err := prepare(t, EnqueueRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Queue != DefaultQueue || p.MaxAttempts != DefaultMaxAttempts || p.LeaseDuration != DefaultLease ||
		p.Backoff != DefaultBackoff || p.State != job.StateAvailable || !p.RunAt.Equal(testNow) ||
		string(p.Payload) != "null" || len(p.ID) != 26 {
		t.Fatalf("defaults not applied: %+v", p)
	}
}

func TestPrepareSchedulesFutureJobs(t *testing.T) {
	t.Parallel()
	p, err := prepare(t, EnqueueRequest{Kind: "k", Delay: time.Minute})
	if err != nil || p.State != job.StateScheduled || !p.RunAt.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("delay: %+v %v", p, err)
	}
	p, err = prepare(t, EnqueueRequest{Kind: "k", RunAt: testNow.Add(-time.Hour)})
	if err != nil || p.State != job.StateAvailable || !p.RunAt.Equal(testNow) {
		t.Fatalf("run_at in the past must run now: %+v %v", p, err)
	}
}

func TestPrepareBackoffOverrides(t *testing.T) {
	t.Parallel()
	p, err := prepare(t, EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Kind: job.BackoffFixed, Base: ptr(5 * time.Second), Jitter: ptr(0.0)}})
	if err != nil {
		t.Fatal(err)
	}
	want := job.Backoff{Kind: job.BackoffFixed, Base: 5 * time.Second, Max: time.Hour, Jitter: 0}
	if p.Backoff != want {
		t.Fatalf("backoff %+v, want %+v", p.Backoff, want)
	}
	p, err = prepare(t, EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Base: ptr(2 * time.Hour)}})
	if err != nil || p.Backoff.Max != 2*time.Hour {
		t.Fatalf("a base above the default max must raise the max: %+v %v", p.Backoff, err)
	}
}

func TestPrepareRejectsBadInput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", job.MaxNameLength+1)
	cases := []struct {
		name  string
		req   EnqueueRequest
		field string
	}{
		{"missing kind", EnqueueRequest{}, "kind"},
		{"bad kind", EnqueueRequest{Kind: "has space"}, "kind"},
		{"bad queue", EnqueueRequest{Kind: "k", Queue: "a/b"}, "queue"},
		{"long queue", EnqueueRequest{Kind: "k", Queue: long}, "queue"},
		{"bad id", EnqueueRequest{Kind: "k", ID: "-x"}, "id"},
		{"reserved id", EnqueueRequest{Kind: "k", ID: "batch"}, "id"},
		{"invalid payload", EnqueueRequest{Kind: "k", Payload: []byte("{")}, "payload"},
		{"priority too high", EnqueueRequest{Kind: "k", Priority: MaxPriority + 1}, "priority"},
		{"priority too low", EnqueueRequest{Kind: "k", Priority: -MaxPriority - 1}, "priority"},
		{"negative delay", EnqueueRequest{Kind: "k", Delay: -time.Second}, "delay_ms"},
		{"delay too long", EnqueueRequest{Kind: "k", Delay: MaxDelay + time.Second}, "delay_ms"},
		{"delay and run_at", EnqueueRequest{Kind: "k", Delay: time.Second, RunAt: testNow}, "delay_ms"},
		{"run_at too far", EnqueueRequest{Kind: "k", RunAt: testNow.Add(MaxDelay + time.Hour)}, "run_at"},
		{"negative attempts", EnqueueRequest{Kind: "k", MaxAttempts: -1}, "max_attempts"},
		{"too many attempts", EnqueueRequest{Kind: "k", MaxAttempts: MaxAttempts + 1}, "max_attempts"},
		{"lease too short", EnqueueRequest{Kind: "k", LeaseDuration: time.Millisecond}, "lease_ms"},
		{"lease too long", EnqueueRequest{Kind: "k", LeaseDuration: MaxLease + 1}, "lease_ms"},
		{"bad backoff type", EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Kind: "linear"}}, "backoff.type"},
		{"negative backoff base", EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Base: ptr(-time.Second)}}, "backoff.base_ms"},
		{"backoff max below base", EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Base: ptr(time.Minute), Max: ptr(time.Second)}}, "backoff.max_ms"},
		{"jitter above one", EnqueueRequest{Kind: "k", Backoff: BackoffRequest{Jitter: ptr(1.5)}}, "backoff.jitter"},
		{"long unique key", EnqueueRequest{Kind: "k", UniqueKey: strings.Repeat("u", MaxUniqueKeyBytes+1)}, "unique_key"},
		{"unique window without key", EnqueueRequest{Kind: "k", UniqueFor: time.Hour}, "unique_for_ms"},
		{"negative unique window", EnqueueRequest{Kind: "k", UniqueKey: "x", UniqueFor: -time.Hour}, "unique_for_ms"},
		{"too many tags", EnqueueRequest{Kind: "k", Tags: make([]string, job.MaxTags+1)}, "tags"},
		{"bad tag", EnqueueRequest{Kind: "k", Tags: []string{"ok", "not ok"}}, "tags[1]"},
		{"upper-case traceparent", EnqueueRequest{Kind: "k", TraceParent: strings.ToUpper(testTraceParent)}, "traceparent"},
		{"traceparent of another version", EnqueueRequest{Kind: "k", TraceParent: "01" + testTraceParent[2:]}, "traceparent"},
		{"traceparent of a zero trace", EnqueueRequest{Kind: "k",
			TraceParent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, "traceparent"},
		{"traceparent cut short", EnqueueRequest{Kind: "k", TraceParent: testTraceParent[:54]}, "traceparent"},
	}
	for _, tc := range cases {
		_, err := prepare(t, tc.req)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != tc.field {
			t.Errorf("%s: err %v, want an input error on %q", tc.name, err, tc.field)
		}
	}
}

// testTraceParent is a valid W3C traceparent.
const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestPrepareKeepsTheTraceParent(t *testing.T) {
	t.Parallel()
	p, err := prepare(t, EnqueueRequest{Kind: "k", TraceParent: testTraceParent})
	if err != nil || p.TraceParent != testTraceParent {
		t.Fatalf("traceparent: %q, %v", p.TraceParent, err)
	}
}

func TestPrepareRejectsOversizedPayload(t *testing.T) {
	t.Parallel()
	big := []byte(`"` + strings.Repeat("x", DefaultMaxPayloadBytes) + `"`)
	_, err := prepare(t, EnqueueRequest{Kind: "k", Payload: big})
	var tooLarge *PayloadTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Field != "payload" {
		t.Fatalf("err %v, want a payload too large error", err)
	}
}

func TestValidateFetch(t *testing.T) {
	t.Parallel()
	e := newTestEngine()
	ok := FetchRequest{Queues: []string{"a"}}
	if err := e.validateFetch(&ok); err != nil || ok.Max != 1 {
		t.Fatalf("minimal fetch: %v, max %d", err, ok.Max)
	}
	grouped := FetchRequest{Queues: []string{"a"}, Group: "tenant é/" + strings.Repeat("g", MaxGroupBytes-10)}
	if err := e.validateFetch(&grouped); err != nil {
		t.Fatalf("fetch of a group of %d bytes: %v", len(grouped.Group), err)
	}
	// A worker's name is free text: what a store cannot keep is kept as
	// U+FFFD, after the bound on what was sent.
	named := FetchRequest{Queues: []string{"a"}, Worker: "w\x00\xff" + strings.Repeat("w", MaxWorkerBytes-3)}
	if err := e.validateFetch(&named); err != nil || named.Worker != "w\uFFFD\uFFFD"+strings.Repeat("w", MaxWorkerBytes-3) {
		t.Fatalf("fetch by a worker with a NUL and a bad byte: %q, %v", named.Worker, err)
	}
	cases := []struct {
		req   FetchRequest
		field string
	}{
		{FetchRequest{}, "queues"},
		{FetchRequest{Queues: make([]string, MaxFetchQueues+1)}, "queues"},
		{FetchRequest{Queues: []string{"a", "b c"}}, "queues[1]"},
		{FetchRequest{Queues: []string{"a"}, Max: MaxFetch + 1}, "max"},
		{FetchRequest{Queues: []string{"a"}, Max: -1}, "max"},
		{FetchRequest{Queues: []string{"a"}, Wait: MaxWait + time.Millisecond}, "wait_ms"},
		{FetchRequest{Queues: []string{"a"}, Wait: -time.Millisecond}, "wait_ms"},
		{FetchRequest{Queues: []string{"a"}, LeaseDuration: time.Millisecond}, "lease_ms"},
		{FetchRequest{Queues: []string{"a"}, Worker: strings.Repeat("w", MaxWorkerBytes+1)}, "worker"},
		{FetchRequest{Queues: []string{"a"}, Group: strings.Repeat("g", MaxGroupBytes+1)}, "group"},
		{FetchRequest{Queues: []string{"a"}, Group: "a\x00b"}, "group"},
		{FetchRequest{Queues: []string{"a"}, Group: "a\xffb"}, "group"},
	}
	for _, tc := range cases {
		err := e.validateFetch(&tc.req)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != tc.field {
			t.Errorf("%+v: err %v, want an input error on %q", tc.req, err, tc.field)
		}
	}
}

func TestBatchLimits(t *testing.T) {
	t.Parallel()
	e := New(nil, Config{MaxBatch: 3, Clock: fixedClock{testNow}})
	_, err := e.EnqueueBatch(t.Context(), make([]EnqueueRequest, 4))
	var tooLarge *BatchTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Max != 3 || tooLarge.Got != 4 {
		t.Fatalf("err %v, want batch too large", err)
	}
	if _, err := e.EnqueueBatch(t.Context(), nil); err == nil {
		t.Fatal("empty batch accepted")
	}
	if _, err := e.Ack(t.Context(), nil); err == nil {
		t.Fatal("empty ack batch accepted")
	}
}

func TestWaitersWakeOnlyTheirQueues(t *testing.T) {
	t.Parallel()
	ws := newWaiters()
	a := ws.add([]string{"a"})
	ab := ws.add([]string{"a", "b"})
	c := ws.add([]string{"c"})
	ws.wake([]string{"b"})
	select {
	case <-ab.ch:
	default:
		t.Fatal("waiter on b not woken")
	}
	select {
	case <-a.ch:
		t.Fatal("waiter on a woken by b")
	case <-c.ch:
		t.Fatal("waiter on c woken by b")
	default:
	}
	if ws.count() != 3 {
		t.Fatalf("count %d", ws.count())
	}
	ws.remove(a)
	ws.remove(ab)
	ws.close()
	select {
	case <-c.ch:
	default:
		t.Fatal("close did not wake the remaining waiter")
	}
	if ws.add([]string{"a"}) != nil {
		t.Fatal("closed waiters accepted a new one")
	}
}
