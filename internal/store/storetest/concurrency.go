package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func concurrencyTests() []group {
	return []group{{"Concurrency", []test{
		{"ClaimsHandOutEveryJobExactlyOnce", testConcurrentClaims},
		{"ClaimsRacingInsertsMissNoJob", testClaimsRaceInserts},
		{"RacingUniqueInsertsCreateOneJob", testConcurrentUnique},
		{"RacingOutcomesOfOneLeaseHaveOneWinner", testRacingOutcomes},
		{"RescueRacingAcksHasOneWinner", testRescueRacesAcks},
	}}}
}

// claimLog records which jobs were handed out, and how often.
type claimLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (l *claimLog) add(js []*job.Job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range js {
		l.seen[j.ID]++
	}
}

// check fails unless exactly the jobs of want were each handed out once.
func (l *claimLog) check(b *bundle, want []string) {
	b.t.Helper()
	if len(l.seen) != len(want) {
		b.t.Fatalf("%d distinct jobs handed out, want %d", len(l.seen), len(want))
	}
	for _, id := range want {
		if n := l.seen[id]; n != 1 {
			b.t.Fatalf("job %s handed out %d times", id, n)
		}
	}
}

// Sixteen workers claiming and acknowledging from one queue of 3000 jobs
// get every job exactly once, each at its first attempt.
func testConcurrentClaims(b *bundle) {
	const total, workers = 3000, 16
	var ids []string
	for range total / 1000 {
		ids = append(ids, b.add(newJobs("q", 1000)...)...)
	}
	log := &claimLog{seen: make(map[string]int)}
	var completed, dead atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1 + rng.IntN(25), Now: t0}))
				if err != nil {
					b.t.Errorf("worker %d: claim: %v", w, err)
					return
				}
				if len(js) == 0 {
					return
				}
				log.add(js)
				var done []job.CompleteItem
				var failed []job.FailItem
				for i, j := range js {
					if j.Attempt != 1 || j.LeaseToken < 1 || j.State != job.StateActive {
						b.t.Errorf("worker %d: job %s handed out in state %s, attempt %d, token %d", w, j.ID, j.State, j.Attempt, j.LeaseToken)
					}
					if i%2 == 0 {
						done = append(done, job.CompleteItem{ID: j.ID, Token: j.LeaseToken})
					} else {
						failed = append(failed, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: true})
					}
				}
				if err := acceptAll(b, done, failed); err != nil {
					b.t.Errorf("worker %d: %v", w, err)
					return
				}
				completed.Add(int64(len(done)))
				dead.Add(int64(len(failed)))
			}
		}()
	}
	wg.Wait()
	if b.t.Failed() {
		return
	}
	log.check(b, ids)
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: completed.Load(), job.StateDead: dead.Load()})
}

// acceptAll completes done and fails failed, and reports any refusal.
func acceptAll(b *bundle, done []job.CompleteItem, failed []job.FailItem) error {
	if len(done) > 0 {
		out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: done, Now: at(time.Second)})
		if err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		for i, o := range out {
			if o.Err != nil || o.State != job.StateCompleted {
				return fmt.Errorf("complete %s: outcome %+v", done[i].ID, o)
			}
		}
	}
	if len(failed) > 0 {
		out, err := b.s.JobFail(b.ctx, &store.JobFailParams{Items: failed, Now: at(time.Second)})
		if err != nil {
			return fmt.Errorf("fail: %w", err)
		}
		for i, o := range out {
			if o.Err != nil || o.State != job.StateDead {
				return fmt.Errorf("fail %s: outcome %+v", failed[i].ID, o)
			}
		}
	}
	return nil
}

// Workers claiming while producers insert miss no job and get none twice.
func testClaimsRaceInserts(b *bundle) {
	const producers, perProducer, workers = 4, 250, 8
	var mu sync.Mutex
	var ids []string
	var inserted atomic.Bool
	var wg, pwg sync.WaitGroup
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 2))
			for left := perProducer; left > 0; {
				n := min(left, 1+rng.IntN(20))
				ps := newJobs("q", n, withPriority(rng.IntN(3)))
				if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
					b.t.Errorf("producer %d: insert: %v", p, err)
					return
				}
				mu.Lock()
				for _, q := range ps {
					ids = append(ids, q.ID)
				}
				mu.Unlock()
				left -= n
			}
		}()
	}
	log := &claimLog{seen: make(map[string]int)}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				last := inserted.Load()
				js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 10, Now: t0}))
				if err != nil {
					b.t.Errorf("worker %d: claim: %v", w, err)
					return
				}
				if len(js) == 0 {
					if last {
						return
					}
					runtime.Gosched()
					continue
				}
				log.add(js)
				items := make([]job.CompleteItem, len(js))
				for i, j := range js {
					items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
				}
				if err := acceptAll(b, items, nil); err != nil {
					b.t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		}()
	}
	pwg.Wait()
	inserted.Store(true)
	wg.Wait()
	if b.t.Failed() {
		return
	}
	log.check(b, ids)
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: producers * perProducer})
}

// Racing inserts of one unique key, or of one id, create exactly one job,
// and every other insert reports that job as the duplicate.
func testConcurrentUnique(b *bundle) {
	const racers = 16
	for _, tc := range []struct {
		name string
		make func(i int) store.JobInsertParams
	}{
		{"key while pending", func(int) store.JobInsertParams { return newJob("a", withUnique("k", 0)) }},
		{"key with a window", func(int) store.JobInsertParams { return newJob("b", withUnique("k", time.Hour)) }},
		{"id", func(i int) store.JobInsertParams {
			return newJob("c", func(p *store.JobInsertParams) { p.ID, p.Kind = "same-id", fmt.Sprintf("k%d", i) })
		}},
	} {
		results := make([]store.InsertResult, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := tc.make(i)
				<-start
				res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{p}, Now: t0})
				if err != nil {
					b.t.Errorf("%s: insert %d: %v", tc.name, i, err)
					return
				}
				results[i] = res[0]
			}()
		}
		close(start)
		wg.Wait()
		if b.t.Failed() {
			return
		}
		var winner string
		for _, r := range results {
			if !r.Duplicate {
				if winner != "" {
					b.t.Fatalf("%s: two jobs created, %s and %s", tc.name, winner, r.Job.ID)
				}
				winner = r.Job.ID
			}
		}
		if winner == "" {
			b.t.Fatalf("%s: every insert was a duplicate", tc.name)
		}
		for i, r := range results {
			if r.Job == nil || r.Job.ID != winner {
				b.t.Fatalf("%s: insert %d resolved to %+v, want job %s", tc.name, i, r.Job, winner)
			}
		}
		q := tc.make(0).Queue
		b.wantCounts(q, map[job.State]int64{job.StateAvailable: 1})
	}
}

// Of a complete, a fail and a release racing on one lease, exactly one
// wins and the job ends as the winner said; a racing extend either works
// or finds the lease lost.
func testRacingOutcomes(b *bundle) {
	const jobs = 40
	b.add(newJobs("q", jobs, withMaxAttempts(5))...)
	js := b.claimAt(t0, jobs, "q")
	if len(js) != jobs {
		b.t.Fatalf("claimed %d jobs, want %d", len(js), jobs)
	}
	type result struct {
		op string
		o  job.Outcome
	}
	results := make([][]result, jobs)
	var wg sync.WaitGroup
	for n, j := range js {
		results[n] = make([]result, 4)
		now := at(time.Second)
		ops := []func() (string, []job.Outcome, error){
			func() (string, []job.Outcome, error) {
				out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}}, Now: now})
				return "complete", out, err
			},
			func() (string, []job.Outcome, error) {
				out, err := b.s.JobFail(b.ctx, &store.JobFailParams{Items: []job.FailItem{{ID: j.ID, Token: j.LeaseToken, Message: "x"}}, Now: now})
				return "fail", out, err
			},
			func() (string, []job.Outcome, error) {
				out, err := b.s.JobRelease(b.ctx, &store.JobReleaseParams{Items: []job.ReleaseItem{{ID: j.ID, Token: j.LeaseToken}}, Now: now})
				return "release", out, err
			},
			func() (string, []job.Outcome, error) {
				out, err := b.s.JobExtend(b.ctx, &store.JobExtendParams{Items: []job.ExtendItem{{ID: j.ID, Token: j.LeaseToken}}, Now: now})
				return "extend", out, err
			},
		}
		for k, op := range ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name, out, err := op()
				if err != nil || len(out) != 1 {
					b.t.Errorf("%s of %s: %d outcomes, %v", name, j.ID, len(out), err)
					return
				}
				results[n][k] = result{name, out[0]}
			}()
		}
	}
	wg.Wait()
	if b.t.Failed() {
		return
	}
	for n, rs := range results {
		var winners []result
		for _, r := range rs {
			switch {
			case r.o.Err == nil && r.op != "extend":
				winners = append(winners, r)
			case r.o.Err != nil && !errors.Is(r.o.Err, job.ErrLeaseLost):
				b.t.Fatalf("%s of job %d: %v, want nil or lease lost", r.op, n, r.o.Err)
			}
		}
		if len(winners) != 1 {
			b.t.Fatalf("job %d: %d winners of one lease: %+v", n, len(winners), winners)
		}
		if got := b.get(js[n].ID); got.State != winners[0].o.State {
			b.t.Fatalf("job %d: %s won with state %s, job is %s", n, winners[0].op, winners[0].o.State, got.State)
		}
	}
}

// An ack racing the rescue of its expired lease either completes the job
// (and the rescue leaves it alone) or finds the lease lost (and the job is
// back with "lease expired" recorded), never both.
func testRescueRacesAcks(b *bundle) {
	const jobs = 200
	b.add(newJobs("q", jobs, withLease(10*time.Second))...)
	js := b.claimAt(t0, jobs, "q")
	if len(js) != jobs {
		b.t.Fatalf("claimed %d jobs, want %d", len(js), jobs)
	}
	now := at(10 * time.Second)
	acked := make([]error, jobs)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; n < jobs; n += 4 {
				out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: js[n].ID, Token: js[n].LeaseToken}}, Now: now})
				if err != nil {
					b.t.Errorf("complete: %v", err)
					return
				}
				acked[n] = out[0].Err
			}
		}()
	}
	var rescued atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			res, err := b.s.JobRescueExpired(b.ctx, now, 7)
			if err != nil {
				b.t.Errorf("rescue: %v", err)
				return
			}
			rescued.Add(int64(res.Count))
			if res.Count == 0 { // every lease had expired: none is left
				return
			}
		}
	}()
	wg.Wait()
	if b.t.Failed() {
		return
	}
	var lost int64
	for n, err := range acked {
		got := b.get(js[n].ID)
		switch {
		case err == nil:
			if got.State != job.StateCompleted || len(got.Errors) != 0 {
				b.t.Fatalf("acked job %d: state %s, errors %+v", n, got.State, got.Errors)
			}
		case errors.Is(err, job.ErrLeaseLost):
			lost++
			if got.State != job.StateAvailable || len(got.Errors) != 1 || got.Errors[0].Message != "lease expired" {
				b.t.Fatalf("job %d lost its lease: state %s, errors %+v", n, got.State, got.Errors)
			}
		default:
			b.t.Fatalf("ack of job %d: %v", n, err)
		}
	}
	if rescued.Load() != lost {
		b.t.Fatalf("%d jobs rescued, %d acks found the lease lost", rescued.Load(), lost)
	}
}
