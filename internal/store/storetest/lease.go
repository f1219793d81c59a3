package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func leaseTests() []group {
	return []group{
		{"LeaseTokens", []test{
			{"UnknownIDIsNotFound", testTokenUnknown},
			{"StaleTokenIsLeaseLost", testTokenStale},
			{"FutureTokenIsLeaseLost", testTokenFuture},
			{"JobNotActiveIsLeaseLost", testTokenNotActive},
			{"BatchItemsApplyOnTheirOwn", testTokenMixedBatch},
		}},
		{"JobComplete", []test{
			{"EndsCompletedWithResult", testComplete},
			{"EndsCancelledWhenCancelRequested", testCompleteCancelRequested},
		}},
		{"JobFail", []test{
			{"RetriesWithBackoffUntilAttemptsRunOut", testFailRetries},
			{"RetryAfterOverridesBackoff", testFailRetryAfter},
			{"NoRetryEndsDead", testFailNoRetry},
			{"AFailureWithoutAMessageIsRecorded", testFailWithoutMessage},
			{"EndsCancelledWhenCancelRequested", testFailCancelRequested},
		}},
		{"JobExtend", []test{
			{"MovesLeaseExpiry", testExtend},
			{"ReportsCancelRequested", testExtendCancelRequested},
		}},
		{"JobProgress", []test{
			{"StoresLatestReportOfTheAttempt", testProgress},
		}},
		{"JobRelease", []test{
			{"MakesAvailableWithoutCountingTheAttempt", testRelease},
			{"NextClaimGetsHigherToken", testReleaseReclaim},
			{"EndsCancelledWhenCancelRequested", testReleaseCancelRequested},
		}},
	}
}

// leaseOp is one of the calls that carry a lease token, reduced to one
// item: it returns the item's outcome error (or the call's, for progress).
type leaseOp struct {
	name string
	do   func(b *bundle, id string, token int64) error
}

var leaseOps = []leaseOp{
	{"complete", func(b *bundle, id string, token int64) error {
		return b.complete(at(time.Second), job.CompleteItem{ID: id, Token: token, Result: json.RawMessage(`1`)})[0].Err
	}},
	{"fail", func(b *bundle, id string, token int64) error {
		return b.fail(at(time.Second), job.FailItem{ID: id, Token: token, Message: "boom"})[0].Err
	}},
	{"fail without retry", func(b *bundle, id string, token int64) error {
		return b.fail(at(time.Second), job.FailItem{ID: id, Token: token, Message: "boom", NoRetry: true})[0].Err
	}},
	{"extend", func(b *bundle, id string, token int64) error {
		return b.extend(at(time.Second), job.ExtendItem{ID: id, Token: token, Lease: time.Hour})[0].Err
	}},
	{"release", func(b *bundle, id string, token int64) error {
		return b.release(at(time.Second), job.ReleaseItem{ID: id, Token: token})[0].Err
	}},
	{"progress", func(b *bundle, id string, token int64) error {
		return b.s.JobProgress(b.ctx, &store.JobProgressParams{ID: id, Token: token, Progress: json.RawMessage(`{"p":1}`), Now: at(time.Second)})
	}},
}

// An unknown id is job.ErrNotFound for every call with a token.
func testTokenUnknown(b *bundle) {
	b.jobIn(job.StateActive, "q")
	for _, op := range leaseOps {
		b.wantErr(op.name+" of an unknown job", op.do(b, "no-such-job", 1), job.ErrNotFound)
	}
}

// The token of an earlier hand-out no longer works once the job went out
// again: every call with it is job.ErrLeaseLost and changes nothing.
func testTokenStale(b *bundle) {
	for i, op := range leaseOps {
		queue := fmt.Sprintf("q%d", i)
		first := b.jobIn(job.StateActive, queue)
		b.accepted("release", b.release(t0, job.ReleaseItem{ID: first.ID, Token: first.LeaseToken}), job.StateAvailable)
		second := b.claimID(at(time.Second), queue, first.ID)
		if second.LeaseToken <= first.LeaseToken {
			b.t.Fatalf("second hand-out token %d, first %d", second.LeaseToken, first.LeaseToken)
		}
		b.wantErr(op.name+" with a stale token", op.do(b, first.ID, first.LeaseToken), job.ErrLeaseLost)
		b.unchanged(op.name+" with a stale token", second)
		if err := op.do(b, first.ID, second.LeaseToken); err != nil {
			b.t.Fatalf("%s with the current token: %v", op.name, err)
		}
	}
}

// A token the store never issued is job.ErrLeaseLost and changes nothing.
func testTokenFuture(b *bundle) {
	for _, op := range leaseOps {
		j := b.jobIn(job.StateActive, "q")
		b.wantErr(op.name+" with a token ahead", op.do(b, j.ID, j.LeaseToken+1), job.ErrLeaseLost)
		b.wantErr(op.name+" with token zero", op.do(b, j.ID, 0), job.ErrLeaseLost)
		b.unchanged(op.name+" with a wrong token", j)
	}
}

// A job that is not active is job.ErrLeaseLost even with its latest
// token, in every state, and the call changes nothing.
func testTokenNotActive(b *bundle) {
	for _, st := range job.States {
		if st == job.StateActive {
			continue
		}
		j := b.jobIn(st, "q")
		for _, op := range leaseOps {
			b.wantErr(fmt.Sprintf("%s of a %s job", op.name, st), op.do(b, j.ID, j.LeaseToken), job.ErrLeaseLost)
			b.unchanged(fmt.Sprintf("%s of a %s job", op.name, st), j)
		}
	}
}

// In one batch, refused items change nothing and do not stop the others.
func testTokenMixedBatch(b *bundle) {
	var good, bad []*job.Job
	for range 4 {
		good = append(good, b.jobIn(job.StateActive, "q"))
		bad = append(bad, b.jobIn(job.StateActive, "q"))
	}
	check := func(what string, out []job.Outcome, want job.State) {
		b.t.Helper()
		if out[0].Err != nil || out[0].State != want || out[0].Queue != "q" {
			b.t.Fatalf("%s: good item %+v, want accepted in state %s of queue q", what, out[0], want)
		}
		b.wantErr(what+": unknown item", out[1].Err, job.ErrNotFound)
		b.wantErr(what+": wrong token item", out[2].Err, job.ErrLeaseLost)
		if out[3].Err != nil || out[3].State != want {
			b.t.Fatalf("%s: item after the refused ones %+v, want accepted", what, out[3])
		}
	}
	now := at(time.Second)
	check("complete", b.complete(now, job.CompleteItem{ID: good[0].ID, Token: good[0].LeaseToken},
		job.CompleteItem{ID: "no-such-job", Token: 1}, job.CompleteItem{ID: bad[0].ID, Token: 99},
		job.CompleteItem{ID: bad[1].ID, Token: bad[1].LeaseToken}), job.StateCompleted)
	check("fail", b.fail(now, job.FailItem{ID: good[1].ID, Token: good[1].LeaseToken, Message: "x"},
		job.FailItem{ID: "no-such-job", Token: 1}, job.FailItem{ID: bad[0].ID, Token: 99},
		job.FailItem{ID: bad[2].ID, Token: bad[2].LeaseToken}), job.StateRetrying)
	check("extend", b.extend(now, job.ExtendItem{ID: good[2].ID, Token: good[2].LeaseToken},
		job.ExtendItem{ID: "no-such-job", Token: 1}, job.ExtendItem{ID: bad[0].ID, Token: 99},
		job.ExtendItem{ID: bad[3].ID, Token: bad[3].LeaseToken}), job.StateActive)
	check("release", b.release(now, job.ReleaseItem{ID: good[3].ID, Token: good[3].LeaseToken},
		job.ReleaseItem{ID: "no-such-job", Token: 1}, job.ReleaseItem{ID: bad[0].ID, Token: 99},
		job.ReleaseItem{ID: bad[3].ID, Token: bad[3].LeaseToken}), job.StateAvailable)
	b.unchanged("refused batch items", bad[0])
	b.wantCounts("q", map[job.State]int64{job.StateActive: 2, job.StateCompleted: 2, job.StateRetrying: 2, job.StateAvailable: 2})
}

// An acknowledged job ends completed at Now with its result stored and
// its lease cleared; its token and attempt stay.
func testComplete(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	out := b.complete(at(5*time.Second), job.CompleteItem{ID: j.ID, Token: j.LeaseToken, Result: json.RawMessage(`{"ok": true, "n": [1,2]}`)})
	if o := out[0]; o.Err != nil || o.State != job.StateCompleted || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want completed in queue q", o)
	}
	want := *j
	want.State, want.FinishedAt, want.LeaseExpiresAt = job.StateCompleted, at(5*time.Second), time.Time{}
	want.Result = json.RawMessage(`{"ok":true,"n":[1,2]}`)
	b.unchanged("checking a completed job", &want)
	b.wantErr("second ack", b.complete(at(6*time.Second), job.CompleteItem{ID: j.ID, Token: j.LeaseToken})[0].Err, job.ErrLeaseLost)
	b.unchanged("a second ack", &want)
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 1})
}

// A job whose cancel was requested while it ran ends cancelled when
// acknowledged, its result still stored.
func testCompleteCancelRequested(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.cancel(j.ID, at(time.Second))
	out := b.complete(at(2*time.Second), job.CompleteItem{ID: j.ID, Token: j.LeaseToken, Result: json.RawMessage(`"partial"`)})
	if o := out[0]; o.Err != nil || o.State != job.StateCancelled || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want cancelled in queue q", o)
	}
	got := b.get(j.ID)
	if got.State != job.StateCancelled || !got.FinishedAt.Equal(at(2*time.Second)) || !jsonEqual(got.Result, json.RawMessage(`"partial"`)) {
		b.t.Fatalf("stored job: state %s, finished %v, result %s", got.State, got.FinishedAt, got.Result)
	}
	b.wantCounts("q", map[job.State]int64{job.StateCancelled: 1})
}

// A failed attempt appends its error and sends the job to retrying with
// RunAt = Now + Backoff.Delay(Attempt, Rand), until the last attempt,
// which ends dead.
func testFailRetries(b *bundle) {
	bo := job.Backoff{Kind: job.BackoffExponential, Base: 10 * time.Second, Max: time.Hour, Jitter: 0.5}
	id := b.add(newJob("q", withMaxAttempts(3), withBackoff(bo)))[0]
	half := func() float64 { return 0.5 }
	var errs []job.AttemptError
	now := t0
	for attempt := 1; attempt <= 3; attempt++ {
		j := b.claimID(now, "q", id)
		if j.Attempt != attempt {
			b.t.Fatalf("hand-out %d has attempt %d", attempt, j.Attempt)
		}
		now = now.Add(time.Second)
		msg := fmt.Sprintf("failure %d", attempt)
		rnd := half
		if attempt == 2 {
			rnd = nil
		}
		out := b.failRand(now, rnd, job.FailItem{ID: id, Token: j.LeaseToken, Message: msg})
		errs = append(errs, job.AttemptError{Attempt: attempt, Message: msg, At: now})
		want := *j
		want.Errors, want.LeaseExpiresAt = errs, time.Time{}
		if attempt < 3 {
			runAt := now.Add(bo.Delay(attempt, rnd))
			if o := out[0]; o.Err != nil || o.State != job.StateRetrying || o.Queue != "q" || !o.RunAt.Equal(runAt) {
				b.t.Fatalf("attempt %d: outcome %+v, want retrying at %v", attempt, o, runAt)
			}
			want.State, want.RunAt = job.StateRetrying, runAt
			b.unchanged(fmt.Sprintf("checking attempt %d", attempt), &want)
			b.wantCounts("q", map[job.State]int64{job.StateRetrying: 1})
			if res, err := b.s.JobPromoteDue(b.ctx, runAt, 10); err != nil || res.Count != 1 {
				b.t.Fatalf("promote the retry: %+v, %v", res, err)
			}
			now = runAt
			continue
		}
		if o := out[0]; o.Err != nil || o.State != job.StateDead || o.Queue != "q" {
			b.t.Fatalf("last attempt: outcome %+v, want dead", o)
		}
		want.State, want.FinishedAt = job.StateDead, now
		b.unchanged("checking the dead job", &want)
	}
	b.wantCounts("q", map[job.State]int64{job.StateDead: 1})
}

// RetryAfter replaces the backoff delay.
func testFailRetryAfter(b *bundle) {
	j := b.jobIn(job.StateActive, "q", withBackoff(job.Backoff{Kind: job.BackoffFixed, Base: time.Second}))
	out := b.failRand(at(time.Minute), func() float64 { return 0.9 }, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "slow down", RetryAfter: 2 * time.Hour})
	if o := out[0]; o.Err != nil || o.State != job.StateRetrying || !o.RunAt.Equal(at(time.Minute+2*time.Hour)) {
		b.t.Fatalf("outcome %+v, want retrying at %v", o, at(time.Minute+2*time.Hour))
	}
	if got := b.get(j.ID); !got.RunAt.Equal(at(time.Minute + 2*time.Hour)) {
		b.t.Fatalf("stored run at %v", got.RunAt)
	}
}

// NoRetry ends the job dead however many attempts it has left.
func testFailNoRetry(b *bundle) {
	j := b.jobIn(job.StateActive, "q", withMaxAttempts(10))
	out := b.fail(at(time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "bad input", NoRetry: true})
	if o := out[0]; o.Err != nil || o.State != job.StateDead || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want dead", o)
	}
	want := *j
	want.State, want.FinishedAt, want.LeaseExpiresAt = job.StateDead, at(time.Second), time.Time{}
	want.Errors = []job.AttemptError{{Attempt: 1, Message: "bad input", At: at(time.Second)}}
	b.unchanged("checking the dead job", &want)
	b.wantCounts("q", map[job.State]int64{job.StateDead: 1})
}

// A failed attempt records its error even without a message, so that a
// job's errors hold one entry per failed attempt on every store.
func testFailWithoutMessage(b *bundle) {
	j := b.jobIn(job.StateActive, "q", withMaxAttempts(10))
	out := b.fail(at(time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken})
	if o := out[0]; o.Err != nil || o.State != job.StateRetrying {
		b.t.Fatalf("outcome %+v, want retrying", o)
	}
	got := b.get(j.ID)
	if want := []job.AttemptError{{Attempt: 1, At: at(time.Second)}}; !slices.Equal(got.Errors, want) {
		b.t.Fatalf("errors %+v, want %+v", got.Errors, want)
	}
}

// A failed attempt of a job whose cancel was requested ends it cancelled,
// with the error still recorded.
func testFailCancelRequested(b *bundle) {
	j := b.jobIn(job.StateActive, "q", withMaxAttempts(10))
	b.cancel(j.ID, t0)
	out := b.fail(at(time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "stopped"})
	if o := out[0]; o.Err != nil || o.State != job.StateCancelled || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want cancelled", o)
	}
	got := b.get(j.ID)
	want := []job.AttemptError{{Attempt: 1, Message: "stopped", At: at(time.Second)}}
	if got.State != job.StateCancelled || !got.FinishedAt.Equal(at(time.Second)) || !errorsEqual(got.Errors, want) {
		b.t.Fatalf("stored job: state %s, finished %v, errors %+v", got.State, got.FinishedAt, got.Errors)
	}
	b.wantCounts("q", map[job.State]int64{job.StateCancelled: 1})
}

// Extend moves the expiry to Now+Lease, or Now plus the job's own
// LeaseDuration (not a claim's override) when Lease is zero; nothing else
// changes, and a rescue before the new expiry leaves the job alone.
func testExtend(b *bundle) {
	id := b.add(newJob("q", withLease(30*time.Second)))[0]
	js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1, LeaseDuration: 5 * time.Second, Now: t0}))
	if err != nil || len(js) != 1 {
		b.t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	j := js[0]
	for _, tc := range []struct {
		now   time.Time
		lease time.Duration
		want  time.Time
	}{
		{at(4 * time.Second), 0, at(34 * time.Second)},
		{at(10 * time.Second), 2 * time.Minute, at(130 * time.Second)},
		{at(20 * time.Second), time.Second, at(21 * time.Second)},
	} {
		out := b.extend(tc.now, job.ExtendItem{ID: id, Token: j.LeaseToken, Lease: tc.lease})
		if o := out[0]; o.Err != nil || o.State != job.StateActive || o.Queue != "q" || !o.LeaseExpiresAt.Equal(tc.want) || o.CancelRequested {
			b.t.Fatalf("extend by %v at %v: outcome %+v, want active until %v", tc.lease, tc.now, o, tc.want)
		}
		want := *j
		want.LeaseExpiresAt = tc.want
		b.unchanged("checking an extended job", &want)
	}
	if res, err := b.s.JobRescueExpired(b.ctx, at(20*time.Second), 10); err != nil || res.Count != 0 || !res.Next.Equal(at(21*time.Second)) {
		b.t.Fatalf("rescue before the extended expiry: %+v, %v", res, err)
	}
}

// Extend tells the worker when a cancel was requested.
func testExtendCancelRequested(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.cancel(j.ID, t0)
	out := b.extend(at(time.Second), job.ExtendItem{ID: j.ID, Token: j.LeaseToken})
	if o := out[0]; o.Err != nil || !o.CancelRequested || o.State != job.StateActive || !o.LeaseExpiresAt.Equal(at(31*time.Second)) {
		b.t.Fatalf("outcome %+v, want active with cancel requested until %v", o, at(31*time.Second))
	}
}

// Progress stores the latest report of the running attempt; the next
// hand-out starts without one.
func testProgress(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	for _, p := range []string{`{"done":1,"of":10}`, `{"done":7, "of":10}`} {
		if err := b.s.JobProgress(b.ctx, &store.JobProgressParams{ID: j.ID, Token: j.LeaseToken, Progress: json.RawMessage(p), Now: at(time.Second)}); err != nil {
			b.t.Fatalf("progress %s: %v", p, err)
		}
		want := *j
		want.Progress = json.RawMessage(p)
		b.unchanged("checking a progress report", &want)
	}
	b.accepted("release", b.release(at(2*time.Second), job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}), job.StateAvailable)
	again := b.claimID(at(3*time.Second), "q", j.ID)
	if len(again.Progress) != 0 || len(b.get(j.ID).Progress) != 0 {
		b.t.Fatalf("new hand-out kept the progress %s of the last one", again.Progress)
	}
}

// A released job is available at once, its attempt not counted, no error
// recorded, its lease cleared and its token kept.
func testRelease(b *bundle) {
	id := b.add(newJob("q", withMaxAttempts(5)))[0]
	first := b.claimID(t0, "q", id)
	b.accepted("fail", b.fail(at(time.Second), job.FailItem{ID: id, Token: first.LeaseToken, Message: "once"}), job.StateRetrying)
	if _, err := b.s.JobPromoteDue(b.ctx, at(time.Hour), 10); err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	j := b.claimID(at(time.Hour), "q", id)
	out := b.release(at(time.Hour+time.Second), job.ReleaseItem{ID: id, Token: j.LeaseToken})
	if o := out[0]; o.Err != nil || o.State != job.StateAvailable || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want available in queue q", o)
	}
	got := b.get(id)
	if got.State != job.StateAvailable || got.Attempt != 1 || len(got.Errors) != 1 || !got.LeaseExpiresAt.IsZero() ||
		got.LeaseToken != j.LeaseToken || !got.FinishedAt.IsZero() {
		b.t.Fatalf("released job: state %s, attempt %d, errors %+v, lease %v, token %d (was %d)",
			got.State, got.Attempt, got.Errors, got.LeaseExpiresAt, got.LeaseToken, j.LeaseToken)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 1})
}

// The next claim of a released job hands it out with a higher token, and
// a released job keeps its place in claim order.
func testReleaseReclaim(b *bundle) {
	ids := b.add(newJobs("q", 3)...)
	js := b.claimAt(t0, 2, "q")
	b.accepted("release", b.release(at(time.Second), job.ReleaseItem{ID: js[1].ID, Token: js[1].LeaseToken},
		job.ReleaseItem{ID: js[0].ID, Token: js[0].LeaseToken}), job.StateAvailable)
	again := b.claimAt(at(2*time.Second), 3, "q")
	if len(again) != 3 || again[0].ID != ids[0] || again[1].ID != ids[1] || again[2].ID != ids[2] {
		b.t.Fatalf("claim after release: %v, want %v", idsOf(again), ids)
	}
	for i, j := range again[:2] {
		if j.LeaseToken <= js[i].LeaseToken || j.Attempt != 1 {
			b.t.Fatalf("re-claimed job %d: token %d (was %d), attempt %d", i, j.LeaseToken, js[i].LeaseToken, j.Attempt)
		}
	}
}

// A released job whose cancel was requested ends cancelled.
func testReleaseCancelRequested(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.cancel(j.ID, t0)
	out := b.release(at(time.Second), job.ReleaseItem{ID: j.ID, Token: j.LeaseToken})
	if o := out[0]; o.Err != nil || o.State != job.StateCancelled || o.Queue != "q" {
		b.t.Fatalf("outcome %+v, want cancelled", o)
	}
	if got := b.get(j.ID); got.State != job.StateCancelled || !got.FinishedAt.Equal(at(time.Second)) || len(got.Errors) != 0 {
		b.t.Fatalf("stored job: state %s, finished %v, errors %+v", got.State, got.FinishedAt, got.Errors)
	}
	if got := b.claimAt(at(time.Second), 10, "q"); len(got) != 0 {
		b.t.Fatalf("a cancelled job was handed out: %v", idsOf(got))
	}
	b.wantCounts("q", map[job.State]int64{job.StateCancelled: 1})
}
