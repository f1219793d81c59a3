package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// t0 is the base of every time the suite passes to a store.
var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// at is t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// topPriority makes a job the next one its queue hands out.
const topPriority = 1000

// bundle is one test's store and the helpers that drive it. Every helper
// fails the test on an unexpected error.
type bundle struct {
	t      *testing.T
	h      Harness
	s      store.Store
	ctx    context.Context
	closed bool // the test closed s itself: skip the final consistency check
}

// setup opens a fresh store for t and checks its consistency when t ends.
func setup(t *testing.T, h Harness) *bundle {
	t.Helper()
	b := &bundle{t: t, h: h, ctx: context.Background()}
	b.s = h.Open(t)
	if b.s == nil {
		t.Fatal("Harness.Open returned a nil store")
	}
	b.checkAtEnd()
	return b
}

// checkAtEnd has the consistency of the current store checked when the
// test ends. Registered after the harness registered the store's release,
// it runs first.
func (b *bundle) checkAtEnd() {
	s := b.s
	b.t.Cleanup(func() {
		if s == b.s && !b.closed && !b.t.Failed() {
			b.checkConsistent()
		}
	})
}

// reopen restarts the store on its data.
func (b *bundle) reopen() {
	b.t.Helper()
	b.s = b.h.Reopen(b.t, b.s)
	if b.s == nil {
		b.t.Fatal("Harness.Reopen returned a nil store")
	}
	b.checkAtEnd()
}

// newJob returns the parameters of an available job of queue, changed by
// opts: three attempts, a 30 s lease and a fixed one-second backoff.
func newJob(queue string, opts ...func(*store.JobInsertParams)) store.JobInsertParams {
	p := store.JobInsertParams{
		ID: job.NewID(t0), Queue: queue, Kind: "test", Payload: json.RawMessage(`{"n":0}`),
		State: job.StateAvailable, RunAt: t0, MaxAttempts: 3, LeaseDuration: 30 * time.Second,
		Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// newJobs returns n jobs of queue with payloads {"n":i}.
func newJobs(queue string, n int, opts ...func(*store.JobInsertParams)) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob(queue, opts...)
		ps[i].Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
	}
	return ps
}

func withPriority(n int) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.Priority = n }
}

func withRunAt(t time.Time) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.RunAt = t }
}

func scheduledAt(t time.Time) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.State, p.RunAt = job.StateScheduled, t }
}

func withMaxAttempts(n int) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.MaxAttempts = n }
}

func withLease(d time.Duration) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.LeaseDuration = d }
}

func withUnique(key string, window time.Duration) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.UniqueKey, p.UniqueFor = key, window }
}

func withBackoff(bo job.Backoff) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.Backoff = bo }
}

// insertAt inserts ps as one batch at now.
func (b *bundle) insertAt(now time.Time, ps ...store.JobInsertParams) []store.InsertResult {
	b.t.Helper()
	res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		b.t.Fatalf("insert %d jobs: %v", len(ps), err)
	}
	if len(res) != len(ps) {
		b.t.Fatalf("insert %d jobs: %d results", len(ps), len(res))
	}
	return res
}

// add inserts ps as one batch at t0, none of them a duplicate, and returns
// their ids.
func (b *bundle) add(ps ...store.JobInsertParams) []string {
	b.t.Helper()
	ids := make([]string, len(ps))
	for i, r := range b.insertAt(t0, ps...) {
		if r.Duplicate || r.Job == nil || r.Job.ID != ps[i].ID {
			b.t.Fatalf("insert job %d: result %+v, want job %s inserted", i, r, ps[i].ID)
		}
		ids[i] = r.Job.ID
	}
	return ids
}

// claimAt claims up to max jobs of queues at now with the jobs' own leases.
func (b *bundle) claimAt(now time.Time, max int, queues ...string) []*job.Job {
	b.t.Helper()
	return b.claimResult(now, max, queues...).Jobs
}

// claimResult claims up to max jobs of queues at now and returns the
// whole result.
func (b *bundle) claimResult(now time.Time, max int, queues ...string) *store.ClaimResult {
	b.t.Helper()
	res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: max, Now: now})
	if err != nil {
		b.t.Fatalf("claim %d from %v: %v", max, queues, err)
	}
	if res == nil {
		b.t.Fatalf("claim %d from %v: nil result", max, queues)
	}
	return res
}

// claimID claims the next job of queue at now and fails unless it is id.
func (b *bundle) claimID(now time.Time, queue, id string) *job.Job {
	b.t.Helper()
	js := b.claimAt(now, 1, queue)
	if len(js) != 1 || js[0].ID != id {
		b.t.Fatalf("claim from %s: got %v, want job %s", queue, idsOf(js), id)
	}
	return js[0]
}

func (b *bundle) get(id string) *job.Job {
	b.t.Helper()
	j, err := b.s.JobGet(b.ctx, id)
	if err != nil {
		b.t.Fatalf("get job %s: %v", id, err)
	}
	return j
}

// complete acknowledges items at now; the call itself must succeed.
func (b *bundle) complete(now time.Time, items ...job.CompleteItem) []job.Outcome {
	b.t.Helper()
	out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: items, Now: now})
	if err != nil {
		b.t.Fatalf("complete %d jobs: %v", len(items), err)
	}
	if len(out) != len(items) {
		b.t.Fatalf("complete %d jobs: %d outcomes", len(items), len(out))
	}
	return out
}

// fail fails items at now without jitter; the call itself must succeed.
func (b *bundle) fail(now time.Time, items ...job.FailItem) []job.Outcome {
	b.t.Helper()
	return b.failRand(now, nil, items...)
}

func (b *bundle) failRand(now time.Time, rnd func() float64, items ...job.FailItem) []job.Outcome {
	b.t.Helper()
	out, err := b.s.JobFail(b.ctx, &store.JobFailParams{Items: items, Now: now, Rand: rnd})
	if err != nil {
		b.t.Fatalf("fail %d jobs: %v", len(items), err)
	}
	if len(out) != len(items) {
		b.t.Fatalf("fail %d jobs: %d outcomes", len(items), len(out))
	}
	return out
}

func (b *bundle) extend(now time.Time, items ...job.ExtendItem) []job.Outcome {
	b.t.Helper()
	out, err := b.s.JobExtend(b.ctx, &store.JobExtendParams{Items: items, Now: now})
	if err != nil {
		b.t.Fatalf("extend %d leases: %v", len(items), err)
	}
	if len(out) != len(items) {
		b.t.Fatalf("extend %d leases: %d outcomes", len(items), len(out))
	}
	return out
}

func (b *bundle) release(now time.Time, items ...job.ReleaseItem) []job.Outcome {
	b.t.Helper()
	out, err := b.s.JobRelease(b.ctx, &store.JobReleaseParams{Items: items, Now: now})
	if err != nil {
		b.t.Fatalf("release %d jobs: %v", len(items), err)
	}
	if len(out) != len(items) {
		b.t.Fatalf("release %d jobs: %d outcomes", len(items), len(out))
	}
	return out
}

func (b *bundle) cancel(id string, now time.Time) *job.Job {
	b.t.Helper()
	j, err := b.s.JobCancel(b.ctx, id, now)
	if err != nil {
		b.t.Fatalf("cancel job %s: %v", id, err)
	}
	return j
}

// accepted fails the test unless every outcome is accepted with state want.
func (b *bundle) accepted(what string, out []job.Outcome, want job.State) {
	b.t.Helper()
	for i, o := range out {
		if o.Err != nil || o.State != want {
			b.t.Fatalf("%s item %d: outcome %+v, want accepted in state %s", what, i, o, want)
		}
	}
}

// jobIn makes a job of queue in state at t0 and returns it as stored.
// States reached through a claim give the job topPriority so that it is
// the one its queue hands out; a retrying job is due at t0+1s.
func (b *bundle) jobIn(state job.State, queue string, opts ...func(*store.JobInsertParams)) *job.Job {
	b.t.Helper()
	switch state {
	case job.StateScheduled:
		return b.get(b.add(newJob(queue, append(opts, scheduledAt(at(time.Hour)))...))[0])
	case job.StateAvailable:
		return b.get(b.add(newJob(queue, opts...))[0])
	case job.StateCancelled:
		id := b.add(newJob(queue, opts...))[0]
		b.cancel(id, t0)
		return b.get(id)
	}
	id := b.add(newJob(queue, append(opts, withPriority(topPriority))...))[0]
	j := b.claimID(t0, queue, id)
	switch state {
	case job.StateActive:
	case job.StateRetrying:
		b.accepted("fail", b.fail(t0, job.FailItem{ID: id, Token: j.LeaseToken, Message: "try again"}), job.StateRetrying)
	case job.StateCompleted:
		b.accepted("complete", b.complete(t0, job.CompleteItem{ID: id, Token: j.LeaseToken}), job.StateCompleted)
	case job.StateDead:
		b.accepted("fail", b.fail(t0, job.FailItem{ID: id, Token: j.LeaseToken, Message: "fatal", NoRetry: true}), job.StateDead)
	default:
		b.t.Fatalf("jobIn: unknown state %q", state)
	}
	return b.get(id)
}

// listAll pages through the listing of queue and state (empty: any) with
// pages of limit jobs, and returns every job listed.
func (b *bundle) listAll(queue string, state job.State, limit int) []*job.Job {
	b.t.Helper()
	return b.listEvery(job.ListParams{Queue: queue, State: state, Limit: limit})
}

// listEvery pages through the listing p names, p.Limit jobs a page, and
// returns every job listed.
func (b *bundle) listEvery(params job.ListParams) []*job.Job {
	b.t.Helper()
	queue, state, limit := params.Queue, params.State, params.Limit
	var all []*job.Job
	seen := make(map[string]bool)
	cursor := ""
	for page := 0; ; page++ {
		if page > 100_000 {
			b.t.Fatalf("list %q/%q: no last page", queue, state)
		}
		params.Cursor = cursor
		p, err := b.s.JobList(b.ctx, &params)
		if err != nil {
			b.t.Fatalf("list %q/%q page %d: %v", queue, state, page, err)
		}
		if len(p.Jobs) > limit {
			b.t.Fatalf("list %q/%q page %d: %d jobs, limit %d", queue, state, page, len(p.Jobs), limit)
		}
		for _, j := range p.Jobs {
			if seen[j.ID] {
				b.t.Fatalf("list %q/%q: job %s listed twice", queue, state, j.ID)
			}
			seen[j.ID] = true
			all = append(all, j)
		}
		if p.Next == "" {
			return all
		}
		if len(p.Jobs) == 0 {
			b.t.Fatalf("list %q/%q page %d: empty page with a next cursor", queue, state, page)
		}
		cursor = p.Next
	}
}

// counts returns the counts of queue.
func (b *bundle) counts(queue string) map[job.State]int64 {
	b.t.Helper()
	q, err := b.s.QueueGet(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("get queue %s: %v", queue, err)
	}
	return q.Counts
}

// wantCounts fails unless queue has exactly the counts of want (states
// not named must be zero).
func (b *bundle) wantCounts(queue string, want map[job.State]int64) {
	b.t.Helper()
	got := b.counts(queue)
	for _, st := range job.States {
		if got[st] != want[st] {
			b.t.Fatalf("queue %s counts %v, want %v", queue, got, want)
		}
	}
}

// checkConsistent compares what the store says of its queues with the
// jobs it lists: every queue's count in every state matches, QueueGet
// agrees with QueueList, and every job's lease expiry is set exactly when
// it is active and its finish time exactly when it is final.
func (b *bundle) checkConsistent() {
	b.t.Helper()
	t := b.t
	qs, err := b.s.QueueList(b.ctx)
	if err != nil {
		t.Errorf("consistency: list queues: %v", err)
		return
	}
	if !sort.SliceIsSorted(qs, func(i, k int) bool { return qs[i].Name < qs[k].Name }) {
		t.Errorf("consistency: queues are not sorted by name: %v", queueNames(qs))
	}
	all := b.listAll("", "", 500)
	have := make(map[string]map[job.State]int64)
	oldest := make(map[string]time.Time)
	for _, j := range all {
		if have[j.Queue] == nil {
			have[j.Queue] = make(map[job.State]int64)
		}
		have[j.Queue][j.State]++
		if o, ok := oldest[j.Queue]; j.State == job.StateAvailable && (!ok || j.RunAt.Before(o)) {
			oldest[j.Queue] = j.RunAt
		}
		if problem := jobInvariant(j); problem != "" {
			t.Errorf("consistency: job %s (%s): %s", j.ID, j.State, problem)
		}
	}
	known := make(map[string]bool)
	for _, q := range qs {
		known[q.Name] = true
		if len(q.Counts) != len(job.States) {
			t.Errorf("consistency: queue %s counts %v do not name every state", q.Name, q.Counts)
		}
		for _, st := range job.States {
			if q.Counts[st] != have[q.Name][st] {
				t.Errorf("consistency: queue %s says %d %s, the store lists %d", q.Name, q.Counts[st], st, have[q.Name][st])
			}
		}
		if !q.OldestAvailable.Equal(oldest[q.Name]) {
			t.Errorf("consistency: queue %s says its oldest available job runs at %v, the store lists %v", q.Name, q.OldestAvailable, oldest[q.Name])
		}
		got, err := b.s.QueueGet(b.ctx, q.Name)
		listed := q
		listed.OldestAvailable = time.Time{} // QueueGet leaves it out
		if err != nil {
			t.Errorf("consistency: get queue %s: %v", q.Name, err)
		} else if !reflect.DeepEqual(*got, listed) {
			t.Errorf("consistency: QueueGet %+v, QueueList %+v", *got, listed)
		}
	}
	for name := range have {
		if !known[name] {
			t.Errorf("consistency: queue %s has jobs but is not listed", name)
		}
	}
}

// jobInvariant describes how j breaks the invariants of job.Job, or
// returns "".
func jobInvariant(j *job.Job) string {
	switch {
	case !j.State.Valid():
		return "unknown state"
	case (j.State == job.StateActive) == j.LeaseExpiresAt.IsZero():
		return fmt.Sprintf("lease expiry %v does not fit the state", j.LeaseExpiresAt)
	case j.State.Final() == j.FinishedAt.IsZero():
		return fmt.Sprintf("finish time %v does not fit the state", j.FinishedAt)
	case j.State == job.StateActive && (j.Attempt < 1 || j.LeaseToken < 1 || j.StartedAt.IsZero()):
		return fmt.Sprintf("active with attempt %d, token %d, started %v", j.Attempt, j.LeaseToken, j.StartedAt)
	case j.LeaseToken < int64(j.Attempt):
		return fmt.Sprintf("token %d below attempt %d", j.LeaseToken, j.Attempt)
	}
	return ""
}

// unchanged fails unless the job now stored under before.ID equals before.
func (b *bundle) unchanged(what string, before *job.Job) {
	b.t.Helper()
	if d := diffJob(b.get(before.ID), before); d != "" {
		b.t.Fatalf("%s changed job %s: %s", what, before.ID, d)
	}
}

// diffJob lists the fields in which got differs from want, or returns "".
// Times compare as instants, payloads byte for byte, results and progress
// as JSON values.
func diffJob(got, want *job.Job) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Queue != want.Queue {
		add("Queue", got.Queue, want.Queue)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		add("Payload", string(got.Payload), string(want.Payload))
	}
	if got.Priority != want.Priority {
		add("Priority", got.Priority, want.Priority)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Attempt != want.Attempt {
		add("Attempt", got.Attempt, want.Attempt)
	}
	if got.MaxAttempts != want.MaxAttempts {
		add("MaxAttempts", got.MaxAttempts, want.MaxAttempts)
	}
	if got.Backoff != want.Backoff {
		add("Backoff", got.Backoff, want.Backoff)
	}
	if got.LeaseDuration != want.LeaseDuration {
		add("LeaseDuration", got.LeaseDuration, want.LeaseDuration)
	}
	if got.UniqueKey != want.UniqueKey {
		add("UniqueKey", got.UniqueKey, want.UniqueKey)
	}
	if got.UniqueFor != want.UniqueFor {
		add("UniqueFor", got.UniqueFor, want.UniqueFor)
	}
	if !slices.Equal(got.Tags, want.Tags) {
		add("Tags", got.Tags, want.Tags)
	}
	if !jsonEqual(got.Result, want.Result) {
		add("Result", string(got.Result), string(want.Result))
	}
	if !jsonEqual(got.Progress, want.Progress) {
		add("Progress", string(got.Progress), string(want.Progress))
	}
	if !errorsEqual(got.Errors, want.Errors) {
		add("Errors", got.Errors, want.Errors)
	}
	if got.LeaseToken != want.LeaseToken {
		add("LeaseToken", got.LeaseToken, want.LeaseToken)
	}
	if got.CancelRequested != want.CancelRequested {
		add("CancelRequested", got.CancelRequested, want.CancelRequested)
	}
	if got.Worker != want.Worker {
		add("Worker", got.Worker, want.Worker)
	}
	if got.TraceParent != want.TraceParent {
		add("TraceParent", got.TraceParent, want.TraceParent)
	}
	for _, tf := range []struct {
		name      string
		got, want time.Time
	}{
		{"RunAt", got.RunAt, want.RunAt},
		{"LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"StartedAt", got.StartedAt, want.StartedAt},
		{"FinishedAt", got.FinishedAt, want.FinishedAt},
	} {
		if !tf.got.Equal(tf.want) {
			add(tf.name, tf.got, tf.want)
		}
	}
	return strings.Join(d, "; ")
}

// jsonEqual reports whether a and b hold the same JSON value; two absent
// values are equal.
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func errorsEqual(a, b []job.AttemptError) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Attempt != b[i].Attempt || a[i].Message != b[i].Message || !a[i].At.Equal(b[i].At) {
			return false
		}
	}
	return true
}

// wantErr fails unless err wraps target.
func (b *bundle) wantErr(what string, err, target error) {
	b.t.Helper()
	if !errors.Is(err, target) {
		b.t.Fatalf("%s: error %v, want one wrapping %q", what, err, target)
	}
}

func idsOf(js []*job.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func queueNames(qs []job.QueueInfo) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name
	}
	return out
}

// queue returns one queue, which must exist.
func (b *bundle) queue(name string) *job.QueueInfo {
	b.t.Helper()
	q, err := b.s.QueueGet(b.ctx, name)
	if err != nil {
		b.t.Fatalf("queue %s: %v", name, err)
	}
	return q
}
