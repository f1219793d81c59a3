package storetest

import (
	"encoding/json"
	"reflect"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func lifecycleTests(h Harness) []group {
	gs := []group{
		{"Capabilities", []test{
			{"MatchTheHarness", testCapabilities},
		}},
		{"Ping", []test{
			{"OpenStoreAnswers", testPing},
		}},
		{"Close", []test{
			{"IsIdempotentAndLaterCallsAreUnavailable", testClose},
		}},
	}
	if h.Reopen != nil {
		gs = append(gs, group{"Restart", []test{
			{"KeepsJobsLeasesQueuesAndCursors", testRestart},
		}})
	}
	return gs
}

func testCapabilities(b *bundle) {
	for range 2 {
		if got := b.s.Capabilities(); got != b.h.Capabilities {
			b.t.Fatalf("capabilities %+v, want %+v", got, b.h.Capabilities)
		}
	}
}

func testPing(b *bundle) {
	if err := b.s.Ping(b.ctx); err != nil {
		b.t.Fatalf("ping a fresh store: %v", err)
	}
	b.jobIn(job.StateActive, "q")
	if err := b.s.Ping(b.ctx); err != nil {
		b.t.Fatalf("ping a store in use: %v", err)
	}
}

// Close can be called again, and every call after it fails with an error
// wrapping job.ErrUnavailable.
func testClose(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.closed = true
	if err := b.s.Close(); err != nil {
		b.t.Fatalf("close: %v", err)
	}
	if err := b.s.Close(); err != nil {
		b.t.Fatalf("second close: %v", err)
	}
	ctx, s := b.ctx, b.s
	bulk := &store.JobBulkParams{Queue: "q", State: job.StateDead, Now: t0}
	calls := map[string]func() error{
		"JobInsertMany": func() error {
			_, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{newJob("q")}, Now: t0})
			return err
		},
		"JobClaim": func() error {
			_, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1, Now: t0}))
			return err
		},
		"JobComplete": func() error {
			_, err := s.JobComplete(ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			return err
		},
		"JobFail": func() error {
			_, err := s.JobFail(ctx, &store.JobFailParams{Items: []job.FailItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			return err
		},
		"JobExtend": func() error {
			_, err := s.JobExtend(ctx, &store.JobExtendParams{Items: []job.ExtendItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			return err
		},
		"JobProgress": func() error {
			return s.JobProgress(ctx, &store.JobProgressParams{ID: j.ID, Token: j.LeaseToken, Progress: json.RawMessage(`1`), Now: t0})
		},
		"JobRelease": func() error {
			_, err := s.JobRelease(ctx, &store.JobReleaseParams{Items: []job.ReleaseItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			return err
		},
		"JobGet":    func() error { _, err := s.JobGet(ctx, j.ID); return err },
		"JobList":   func() error { _, err := s.JobList(ctx, &job.ListParams{Limit: 10}); return err },
		"JobCancel": func() error { _, err := s.JobCancel(ctx, j.ID, t0); return err },
		"JobRetry":  func() error { _, err := s.JobRetry(ctx, j.ID, t0); return err },
		"JobDelete": func() error { return s.JobDelete(ctx, j.ID) },
		"JobRetryMany": func() error {
			_, err := s.JobRetryMany(ctx, bulk)
			return err
		},
		"JobDeleteMany": func() error {
			_, err := s.JobDeleteMany(ctx, bulk)
			return err
		},
		"QueueList":      func() error { _, err := s.QueueList(ctx); return err },
		"QueueGet":       func() error { _, err := s.QueueGet(ctx, "q"); return err },
		"QueueDefaults":  func() error { _, err := s.QueueDefaults(ctx, "q"); return err },
		"QueueSetPaused": func() error { return s.QueueSetPaused(ctx, "q", true) },
		"QueuePurge":     func() error { _, err := s.QueuePurge(ctx, "q"); return err },
		"QueueSetSettings": func() error {
			return s.QueueSetSettings(ctx, "q", job.QueueSettings{DeadLetterQueue: "d"})
		},
		"JobPromoteDue": func() error {
			_, err := s.JobPromoteDue(ctx, t0, 10)
			return err
		},
		"JobRescueExpired": func() error {
			_, err := s.JobRescueExpired(ctx, at(time.Hour), 10)
			return err
		},
		"JobExpireWaiting": func() error {
			_, err := s.JobExpireWaiting(ctx, at(time.Hour), 10)
			return err
		},
		"JobPrune": func() error {
			_, err := s.JobPrune(ctx, &store.JobPruneParams{CompletedBefore: at(time.Hour), Limit: 10})
			return err
		},
		"Ping": func() error { return s.Ping(ctx) },
	}
	for name, call := range calls {
		b.wantErr(name+" after close", call(), job.ErrUnavailable)
	}
	if got := s.Capabilities(); got != b.h.Capabilities {
		b.t.Fatalf("capabilities after close %+v, want %+v", got, b.h.Capabilities)
	}
}

// A restart on the same data keeps every job as it was, the queues and
// their counts, the leases (their tokens still work), paused flags,
// unique keys and listing cursors.
func testRestart(b *bundle) {
	ps := newJobs("q", 10)
	for i := range ps {
		ps[i].Priority = i % 3
	}
	b.add(ps...)
	b.add(newJob("q", scheduledAt(at(time.Minute))), newJob("q", withUnique("u", 0)))
	b.add(newJobs("p", 2)...)
	if err := b.s.QueueSetPaused(b.ctx, "p", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	js := b.claimAt(t0, 3, "q")
	b.accepted("complete", b.complete(at(time.Second), job.CompleteItem{ID: js[0].ID, Token: js[0].LeaseToken, Result: json.RawMessage(`"r"`)}), job.StateCompleted)
	b.accepted("fail", b.fail(at(time.Second), job.FailItem{ID: js[1].ID, Token: js[1].LeaseToken, Message: "x"}), job.StateRetrying)
	if err := b.s.JobProgress(b.ctx, &store.JobProgressParams{ID: js[2].ID, Token: js[2].LeaseToken, Progress: json.RawMessage(`{"p":1}`), Now: t0}); err != nil {
		b.t.Fatalf("progress: %v", err)
	}
	page, err := b.s.JobList(b.ctx, &job.ListParams{Limit: 4})
	if err != nil || page.Next == "" {
		b.t.Fatalf("first page: %+v, %v", page, err)
	}
	queues, err := b.s.QueueList(b.ctx)
	if err != nil {
		b.t.Fatalf("list queues: %v", err)
	}
	jobs := b.listAll("", "", 1000)

	b.reopen()

	if got, err := b.s.QueueList(b.ctx); err != nil || !reflect.DeepEqual(got, queues) {
		b.t.Fatalf("queues after restart %+v (%v), before %+v", got, err, queues)
	}
	after := b.listAll("", "", 1000)
	if len(after) != len(jobs) {
		b.t.Fatalf("%d jobs after restart, %d before", len(after), len(jobs))
	}
	for i := range jobs {
		if d := diffJob(after[i], jobs[i]); d != "" {
			b.t.Fatalf("job %d after restart: %s", i, d)
		}
	}
	rest, err := b.s.JobList(b.ctx, &job.ListParams{Limit: 1000, Cursor: page.Next})
	if err != nil || !slices.Equal(idsOf(rest.Jobs), idsOf(jobs[4:])) {
		b.t.Fatalf("page after restart with an earlier cursor: %v, %v", idsOf(rest.Jobs), err)
	}
	b.accepted("complete", b.complete(at(2*time.Second), job.CompleteItem{ID: js[2].ID, Token: js[2].LeaseToken}), job.StateCompleted)
	if res := b.insertAt(at(time.Hour), newJob("q", withUnique("u", 0))); !res[0].Duplicate {
		b.t.Fatal("a unique key was forgotten in the restart")
	}
	if got := b.claimAt(at(2*time.Second), 100, "p"); len(got) != 0 {
		b.t.Fatalf("paused queue handed out %d jobs after restart", len(got))
	}
	res, err := b.s.JobPromoteDue(b.ctx, at(2*time.Second), 10)
	if err != nil || res.Count != 1 || !res.Next.Equal(at(time.Minute)) {
		b.t.Fatalf("promote after restart: %+v, %v", res, err)
	}
	var want []string
	for _, j := range b.listAll("q", job.StateAvailable, 1000) {
		want = append(want, j.ID)
	}
	got := b.claimAt(at(2*time.Second), 100, "q")
	if len(got) != len(want) {
		b.t.Fatalf("claimed %d jobs after restart, %d available", len(got), len(want))
	}
	for i := 1; i < len(got); i++ {
		if p, c := got[i-1], got[i]; p.Priority < c.Priority || p.Priority == c.Priority && p.RunAt.After(c.RunAt) {
			b.t.Fatalf("claims after restart out of order: %+v before %+v", p, c)
		}
	}
	for _, j := range got {
		if j.ID == js[1].ID && j.LeaseToken <= js[1].LeaseToken {
			b.t.Fatalf("second hand-out after restart has token %d, want above %d", j.LeaseToken, js[1].LeaseToken)
		}
	}
}
