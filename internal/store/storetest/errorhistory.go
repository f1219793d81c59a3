package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func errorHistoryTests() []group {
	return []group{{"ErrorHistory", []test{
		{"AJobKeepsItsFirstAndLatestErrors", testErrorHistoryBounded},
		{"LongMessagesKeepAHistoryWithinItsBytes", testErrorHistoryBytes},
	}}}
}

// wantHistory fails unless j's errors are first followed by latest (by
// message), with dropped errors dropped between them.
func (b *bundle) wantHistory(what string, j *job.Job, first string, latest []string, dropped int) {
	b.t.Helper()
	got := make([]string, len(j.Errors))
	for i, e := range j.Errors {
		got[i] = e.Message
	}
	want := append([]string{first}, latest...)
	if !slices.Equal(got, want) || j.ErrorsDropped != dropped {
		b.t.Fatalf("%s: errors %q with %d dropped;\nwant %q with %d dropped", what, got, j.ErrorsDropped, want, dropped)
	}
}

// failures returns the messages "failure from" to "failure to".
func failures(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("failure %d", i))
	}
	return out
}

// A job that fails many more times than its history keeps holds its first
// error and its latest job.LatestErrors, with a count of those dropped
// between; an expired lease and a maximum wait passed are recorded under
// the same bounds, and a dead-letter copy carries the bounded history and
// its count.
func testErrorHistoryBounded(b *bundle) {
	b.settle("q", job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Hour})
	n := 2*job.LatestErrors + 5
	id := b.add(newJob("q", withMaxAttempts(n), withLease(time.Minute)))[0]
	now := t0
	for i := 1; i < n; i++ {
		o := b.failID(now, "q", id, fmt.Sprintf("failure %d", i), false)
		if o.State != job.StateRetrying {
			b.t.Fatalf("failure %d: %+v, want retrying", i, o)
		}
		now = now.Add(time.Second) // the fixed backoff
		if _, err := b.s.JobPromoteDue(b.ctx, now, 10); err != nil {
			b.t.Fatalf("promote: %v", err)
		}
	}
	latest := failures(n-job.LatestErrors, n-1)
	b.wantHistory("after the failures", b.get(id), "failure 1", latest, n-2-job.LatestErrors)

	// The last attempt's lease runs out: the job dies, and its copy
	// carries the history as the dead job holds it.
	b.claimID(now, "q", id)
	now = now.Add(time.Minute)
	if res, err := b.s.JobRescueExpired(b.ctx, now, 10); err != nil || res.Count != 1 {
		b.t.Fatalf("rescue: %+v, %v", res, err)
	}
	latest = append(latest[1:], job.LeaseExpiredMessage)
	dead := b.get(id)
	b.wantHistory("after the lease ran out", dead, "failure 1", latest, n-1-job.LatestErrors)
	copies := b.lettersIn("q-dlq")
	if len(copies) != 1 {
		b.t.Fatalf("q-dlq holds %d jobs, want the copy", len(copies))
	}
	b.wantHistory("the copy", copies[0], "failure 1", latest, n-1-job.LatestErrors)

	// Retried by hand, it waits past its queue's maximum wait and dies
	// of it, once more under the bounds.
	if _, err := b.s.JobRetry(b.ctx, id, now); err != nil {
		b.t.Fatalf("retry: %v", err)
	}
	now = now.Add(time.Hour)
	if res := b.sweep(now, 10); res.Count != 1 {
		b.t.Fatalf("sweep: %+v", res)
	}
	latest = append(latest[1:], job.MaxWaitMessage)
	b.wantHistory("after the maximum wait", b.get(id), "failure 1", latest, n-job.LatestErrors)
	if res := b.sweep(now, 10); res.Count != 0 {
		b.t.Fatalf("second sweep: %+v", res)
	}
	if b.h.Reopen != nil {
		b.reopen()
		b.wantHistory("after a restart", b.get(id), "failure 1", latest, n-job.LatestErrors)
	}
}

// Errors of the longest message a job may record fill its history's
// bytes before its count: the history keeps the first and as many of the
// latest as fit in job.MaxErrorHistoryBytes.
func testErrorHistoryBytes(b *bundle) {
	const n = 10
	id := b.add(newJob("q", withMaxAttempts(n)))[0]
	long := func(i int) string {
		return fmt.Sprintf("%02d", i) + strings.Repeat("x", job.MaxErrorBytes-2)
	}
	now := t0
	for i := 1; i <= n; i++ {
		j := b.claimID(now, "q", id)
		o := b.fail(now, job.FailItem{ID: id, Token: j.LeaseToken, Message: long(i)})[0]
		if o.Err != nil {
			b.t.Fatalf("failure %d: %v", i, o.Err)
		}
		now = now.Add(time.Second)
		if _, err := b.s.JobPromoteDue(b.ctx, now, 10); err != nil {
			b.t.Fatalf("promote: %v", err)
		}
	}
	j := b.get(id)
	keep := job.MaxErrorHistoryBytes/job.MaxErrorBytes - 1 // besides the first
	size := 0
	for _, e := range j.Errors {
		size += len(e.Message)
	}
	if j.State != job.StateDead || len(j.Errors) != keep+1 || j.ErrorsDropped != n-1-keep || size > job.MaxErrorHistoryBytes {
		b.t.Fatalf("%s job with %d errors (%d bytes), %d dropped; want dead with %d errors within %d bytes, %d dropped",
			j.State, len(j.Errors), size, j.ErrorsDropped, keep+1, job.MaxErrorHistoryBytes, n-1-keep)
	}
	if j.Errors[0].Message != long(1) || j.Errors[1].Message != long(n-keep+1) || j.Errors[keep].Message != long(n) {
		b.t.Fatalf("kept errors of attempts %d, %d … %d; want 1, %d … %d",
			j.Errors[0].Attempt, j.Errors[1].Attempt, j.Errors[keep].Attempt, n-keep+1, n)
	}
}
