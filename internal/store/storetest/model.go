package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func modelTests() []group {
	return []group{{"Model", []test{
		{"RandomOperationsMatchTheContract", testModel},
	}}}
}

// modelSeeds are the fixed seeds of the model test; one more seed, drawn
// at random and named in the subtest, widens the search on every run. A
// failure names its seed and step: add the seed here to replay it.
var modelSeeds = []uint64{1, 2, 3}

const modelSteps = 400

// mjob is what the contract says a store holds for one job.
type mjob struct {
	id, queue, key       string
	seq                  int
	priority             int
	state                job.State
	runAt, created       time.Time
	leaseExp, finished   time.Time
	attempt, maxAttempts int
	token                int64
	lease                time.Duration
	cancel               bool
	// errs counts the errors recorded; the store keeps the first and
	// the latest of them (job.BoundErrors).
	errs int
}

// model is a reference implementation of the contract, kept beside the
// store under test: every operation is applied to both, and their answers
// and states compared.
type model struct {
	b      *bundle
	rng    *rand.Rand
	seed   uint64
	step   int
	op     string
	now    time.Time
	seq    int
	jobs   map[string]*mjob
	paused map[string]bool // every known queue
	ids    []string        // every id ever inserted, deleted ones too
}

var modelQueues = []string{"a", "b", "c"}

// modelBackoff is the retry delay of every model job.
const modelBackoff = 5 * time.Second

// testModel runs random operations against a fresh store and the model
// for each seed, comparing them after every step.
func testModel(b *bundle) {
	for _, seed := range append(slices.Clone(modelSeeds), rand.Uint64()) {
		b.t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := &model{b: setup(t, b.h), rng: rand.New(rand.NewPCG(seed, 99)), seed: seed, now: t0,
				jobs: make(map[string]*mjob), paused: make(map[string]bool)}
			for m.step = 0; m.step < modelSteps; m.step++ {
				m.randomStep()
				m.compare()
			}
		})
	}
}

// fatalf fails the test, naming the seed and step to replay.
func (m *model) fatalf(format string, args ...any) {
	m.b.t.Helper()
	m.b.t.Fatalf("model seed %d step %d (%s): %s", m.seed, m.step, m.op, fmt.Sprintf(format, args...))
}

func (m *model) randomStep() {
	m.now = m.now.Add(time.Duration(m.rng.IntN(5)) * time.Second)
	queue := modelQueues[m.rng.IntN(len(modelQueues))]
	switch r := m.rng.IntN(100); {
	case r < 22:
		m.insert()
	case r < 40:
		m.claim()
	case r < 62:
		m.outcome()
	case r < 68:
		m.cancel()
	case r < 73:
		m.retry()
	case r < 77:
		m.delete()
	case r < 83:
		m.promote()
	case r < 89:
		m.rescue()
	case r < 93:
		m.setPaused(queue, m.rng.IntN(2) == 0)
	case r < 95:
		m.purge(queue)
	case r < 97:
		m.bulk(queue)
	default:
		m.prune()
	}
}

// pick returns a random model job matching keep, or nil.
func (m *model) pick(keep func(*mjob) bool) *mjob {
	var c []*mjob
	for _, id := range m.ids {
		if j := m.jobs[id]; j != nil && keep(j) {
			c = append(c, j)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[m.rng.IntN(len(c))]
}

func (m *model) insert() {
	m.op = "insert"
	n := 1 + m.rng.IntN(4)
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		p := newJob(modelQueues[m.rng.IntN(len(modelQueues))])
		p.Priority = m.rng.IntN(4) - 1
		p.RunAt = m.now.Add(-time.Duration(m.rng.IntN(3)) * time.Second)
		if m.rng.IntN(5) == 0 {
			p.State, p.RunAt = job.StateScheduled, m.now.Add(time.Duration(m.rng.IntN(30))*time.Second)
		}
		p.MaxAttempts = 1 + m.rng.IntN(3)
		p.LeaseDuration = time.Duration(10+10*m.rng.IntN(2)) * time.Second
		p.Backoff = job.Backoff{Kind: job.BackoffFixed, Base: modelBackoff}
		if m.rng.IntN(3) == 0 {
			p.UniqueKey = fmt.Sprintf("k%d", m.rng.IntN(2))
			p.UniqueFor = time.Duration(m.rng.IntN(2)) * 30 * time.Second
		}
		if len(m.ids) > 0 && m.rng.IntN(10) == 0 {
			p.ID = m.ids[m.rng.IntN(len(m.ids))]
			if j := m.jobs[p.ID]; j != nil && m.rng.IntN(4) != 0 {
				p.Queue = j.queue // mostly a retried enqueue; else an id taken
			}
		}
		ps[i] = p
	}
	res, err := m.b.s.JobInsertMany(m.b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: m.now})
	if taken := m.takenIDs(ps); len(taken) > 0 {
		var e *job.IDTakenError
		if !errors.As(err, &e) || !errors.Is(err, job.ErrIDTaken) || !taken[e.Field] {
			m.fatalf("%d results, %v; want an id taken error on one of %v", len(res), err, taken)
		}
		return
	}
	if err != nil || len(res) != n {
		m.fatalf("%d results, %v", len(res), err)
	}
	for i, p := range ps {
		dup := m.duplicate(&p)
		if dup == nil {
			m.seq++
			m.jobs[p.ID] = &mjob{id: p.ID, queue: p.Queue, key: p.UniqueKey, seq: m.seq, priority: p.Priority,
				state: p.State, runAt: p.RunAt, created: m.now, maxAttempts: p.MaxAttempts, lease: p.LeaseDuration}
			m.ids = append(m.ids, p.ID)
			if _, ok := m.paused[p.Queue]; !ok {
				m.paused[p.Queue] = false
			}
		}
		switch {
		case res[i].Job == nil:
			m.fatalf("job %d: no job in the result", i)
		case dup == nil && (res[i].Duplicate || res[i].Job.ID != p.ID):
			m.fatalf("job %d: result %s (duplicate %v), want it inserted", i, res[i].Job.ID, res[i].Duplicate)
		case dup != nil && (!res[i].Duplicate || res[i].Job.ID != dup.id):
			m.fatalf("job %d: result %s (duplicate %v), want a duplicate of %s", i, res[i].Job.ID, res[i].Duplicate, dup.id)
		}
	}
}

// takenIDs returns the fields ("jobs[i].id") of the jobs of ps whose id
// belongs to a job of another queue, in the store or earlier in ps,
// taking the batch's duplicates as the contract does; none when ps goes
// in. It leaves the model as it was.
func (m *model) takenIDs(ps []store.JobInsertParams) map[string]bool {
	taken := make(map[string]bool)
	added := make(map[string]*mjob)
	for i := range ps {
		p := &ps[i]
		if j := m.jobs[p.ID]; j != nil {
			if j.queue != p.Queue {
				taken[fmt.Sprintf("jobs[%d].id", i)] = true
			}
			continue
		}
		if m.duplicate(p) == nil {
			j := &mjob{id: p.ID, queue: p.Queue, key: p.UniqueKey, state: p.State, created: m.now}
			m.jobs[p.ID], added[p.ID] = j, j
		}
	}
	for id := range added {
		delete(m.jobs, id)
	}
	return taken
}

// duplicate returns the job that p duplicates by the contract, or nil.
func (m *model) duplicate(p *store.JobInsertParams) *mjob {
	if j := m.jobs[p.ID]; j != nil {
		return j
	}
	if p.UniqueKey == "" {
		return nil
	}
	var newest *mjob
	for _, j := range m.jobs {
		if j.queue == p.Queue && j.key == p.UniqueKey && (newest == nil || j.seq > newest.seq) {
			newest = j
		}
	}
	switch {
	case newest == nil:
		return nil
	case p.UniqueFor == 0 && newest.state.Pending():
		return newest
	case p.UniqueFor > 0 && newest.created.After(m.now.Add(-p.UniqueFor)) && newest.state != job.StateCancelled:
		return newest
	}
	return nil
}

func (m *model) claim() {
	m.op = "claim"
	var queues []string
	for _, q := range modelQueues {
		if m.rng.IntN(2) == 0 {
			queues = append(queues, q)
		}
	}
	queues = append(queues, "unknown")
	max := 1 + m.rng.IntN(6)
	var override time.Duration
	if m.rng.IntN(3) == 0 {
		override = 15 * time.Second
	}
	var want []*mjob
	for _, j := range m.jobs {
		if j.state == job.StateAvailable && slices.Contains(queues, j.queue) && !m.paused[j.queue] {
			want = append(want, j)
		}
	}
	sort.Slice(want, func(i, k int) bool {
		a, c := want[i], want[k]
		if a.priority != c.priority {
			return a.priority > c.priority
		}
		if !a.runAt.Equal(c.runAt) {
			return a.runAt.Before(c.runAt)
		}
		return a.seq < c.seq
	})
	want = want[:min(max, len(want))]
	got, err := store.ClaimedJobs(m.b.s.JobClaim(m.b.ctx, &store.JobClaimParams{Queues: queues, Max: max, LeaseDuration: override, Now: m.now}))
	if err != nil {
		m.fatalf("%v", err)
	}
	if len(got) != len(want) {
		m.fatalf("claimed %v, want %d jobs", idsOf(got), len(want))
	}
	for i, j := range want {
		if got[i].ID != j.id {
			m.fatalf("claim %d is %s, want %s", i, got[i].ID, j.id)
		}
		j.state, j.attempt = job.StateActive, j.attempt+1
		lease := j.lease
		if override > 0 {
			lease = override
		}
		j.leaseExp = m.now.Add(lease)
		if got[i].Attempt != j.attempt || got[i].LeaseToken <= j.token || !got[i].LeaseExpiresAt.Equal(j.leaseExp) {
			m.fatalf("claimed %s with attempt %d, token %d, lease until %v; want %d, above %d, %v",
				j.id, got[i].Attempt, got[i].LeaseToken, got[i].LeaseExpiresAt, j.attempt, j.token, j.leaseExp)
		}
		j.token = got[i].LeaseToken
	}
}

// outcome completes, fails, releases or extends a job, with its current
// token mostly, or with a wrong one or on a job not active.
func (m *model) outcome() {
	kinds := []string{"complete", "fail", "fail for good", "release", "extend"}
	kind := kinds[m.rng.IntN(len(kinds))]
	m.op = kind
	j := m.pick(func(j *mjob) bool { return j.state == job.StateActive })
	token := int64(0)
	valid := j != nil && m.rng.IntN(8) != 0
	if j == nil || !valid {
		if j == nil || m.rng.IntN(2) == 0 {
			j = m.pick(func(*mjob) bool { return true })
		}
		if j == nil {
			return
		}
		token = j.token - int64(m.rng.IntN(2))
		if j.state == job.StateActive && token == j.token {
			token++
		}
	} else {
		token = j.token
	}
	var o store.Outcome
	switch kind {
	case "complete":
		o = m.b.complete(m.now, store.JobCompleteItem{ID: j.id, Token: token})[0]
	case "fail", "fail for good":
		o = m.b.fail(m.now, store.JobFailItem{ID: j.id, Token: token, Message: "x", NoRetry: kind == "fail for good"})[0]
	case "release":
		o = m.b.release(m.now, store.JobReleaseItem{ID: j.id, Token: token})[0]
	case "extend":
		o = m.b.extend(m.now, store.JobExtendItem{ID: j.id, Token: token})[0]
	}
	if !valid {
		if !errors.Is(o.Err, job.ErrLeaseLost) {
			m.fatalf("%s job %s with token %d (current %d): %+v, want lease lost", j.state, j.id, token, j.token, o)
		}
		return
	}
	if o.Err != nil {
		m.fatalf("job %s: %v", j.id, o.Err)
	}
	switch kind {
	case "complete":
		m.finish(j, job.StateCompleted)
	case "fail", "fail for good":
		j.errs++
		switch {
		case j.cancel:
			m.finish(j, job.StateCancelled)
		case kind == "fail for good" || j.attempt >= j.maxAttempts:
			m.finish(j, job.StateDead)
		default:
			j.state, j.runAt, j.leaseExp = job.StateRetrying, m.now.Add(modelBackoff), time.Time{}
		}
	case "release":
		j.attempt--
		if j.cancel {
			m.finish(j, job.StateCancelled)
		} else {
			j.state, j.leaseExp = job.StateAvailable, time.Time{}
		}
	case "extend":
		j.leaseExp = m.now.Add(j.lease)
		if !o.LeaseExpiresAt.Equal(j.leaseExp) || o.CancelRequested != j.cancel {
			m.fatalf("extend %s: %+v, want until %v, cancel requested %v", j.id, o, j.leaseExp, j.cancel)
		}
	}
	if o.State != j.state || o.Queue != j.queue {
		m.fatalf("job %s: outcome state %s in %s, want %s in %s", j.id, o.State, o.Queue, j.state, j.queue)
	}
}

// finish moves j to final state st now; a cancel request still ends it
// cancelled.
func (m *model) finish(j *mjob, st job.State) {
	if j.cancel && st == job.StateCompleted {
		st = job.StateCancelled
	}
	j.state, j.finished, j.leaseExp = st, m.now, time.Time{}
}

func (m *model) cancel() {
	m.op = "cancel"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	got, err := m.b.s.JobCancel(m.b.ctx, j.id, m.now)
	switch j.state {
	case job.StateCompleted, job.StateDead:
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("cancel a %s job: %v, want invalid state", j.state, err)
		}
		return
	case job.StateActive:
		j.cancel = true
	case job.StateCancelled:
	default:
		j.state, j.finished = job.StateCancelled, m.now
	}
	if err != nil || got.State != j.state || got.CancelRequested != j.cancel {
		m.fatalf("cancel job %s: %+v, %v", j.id, got, err)
	}
}

func (m *model) retry() {
	m.op = "retry"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	got, err := m.b.s.JobRetry(m.b.ctx, j.id, m.now)
	switch j.state {
	case job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled:
		m.revive(j)
		if err != nil || got.State != job.StateAvailable {
			m.fatalf("retry a job: %+v, %v", got, err)
		}
	default:
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("retry a %s job: %v, want invalid state", j.state, err)
		}
	}
}

// revive applies a retry to j.
func (m *model) revive(j *mjob) {
	j.state, j.attempt, j.runAt, j.finished, j.cancel = job.StateAvailable, 0, m.now, time.Time{}, false
}

func (m *model) delete() {
	m.op = "delete"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	err := m.b.s.JobDelete(m.b.ctx, j.id)
	if j.state == job.StateActive {
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("delete an active job: %v, want invalid state", err)
		}
		return
	}
	if err != nil {
		m.fatalf("delete a %s job: %v", j.state, err)
	}
	delete(m.jobs, j.id)
}

func (m *model) promote() {
	m.op = "promote"
	queues := make(map[string]bool)
	count := 0
	var next time.Time
	for _, j := range m.jobs {
		if j.state != job.StateScheduled && j.state != job.StateRetrying {
			continue
		}
		if !j.runAt.After(m.now) {
			j.state = job.StateAvailable
			queues[j.queue] = true
			count++
		} else if next.IsZero() || j.runAt.Before(next) {
			next = j.runAt
		}
	}
	res, err := m.b.s.JobPromoteDue(m.b.ctx, m.now, 1000)
	if err != nil {
		m.fatalf("%v", err)
	}
	m.checkPass(res, count, queues, next)
}

func (m *model) rescue() {
	m.op = "rescue"
	queues := make(map[string]bool)
	count := 0
	var next time.Time
	for _, j := range m.jobs {
		if j.state != job.StateActive {
			continue
		}
		if j.leaseExp.After(m.now) {
			if next.IsZero() || j.leaseExp.Before(next) {
				next = j.leaseExp
			}
			continue
		}
		count++
		j.errs++
		switch {
		case j.cancel:
			m.finish(j, job.StateCancelled)
		case j.attempt >= j.maxAttempts:
			m.finish(j, job.StateDead)
		default:
			j.state, j.leaseExp = job.StateAvailable, time.Time{}
			queues[j.queue] = true
		}
	}
	res, err := m.b.s.JobRescueExpired(m.b.ctx, m.now, 1000)
	if err != nil {
		m.fatalf("%v", err)
	}
	m.checkPass(res, count, queues, next)
}

func (m *model) checkPass(res *store.MaintenanceResult, count int, queues map[string]bool, next time.Time) {
	m.b.t.Helper()
	got := make(map[string]bool)
	for _, q := range res.Available {
		if got[q] {
			m.fatalf("queue %s named twice in %v", q, res.Available)
		}
		got[q] = true
	}
	if res.Count != count || !sameSet(got, queues) || !res.Next.Equal(next) {
		m.fatalf("result %+v, want %d jobs, queues %v, next %v", res, count, queues, next)
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func (m *model) setPaused(queue string, paused bool) {
	m.op = fmt.Sprintf("set %s paused %v", queue, paused)
	if err := m.b.s.QueueSetPaused(m.b.ctx, queue, paused); err != nil {
		m.fatalf("%v", err)
	}
	m.paused[queue] = paused
}

func (m *model) purge(queue string) {
	m.op = "purge " + queue
	want := 0
	for id, j := range m.jobs {
		if j.queue == queue && j.state == job.StateAvailable {
			delete(m.jobs, id)
			want++
		}
	}
	if n, err := m.b.s.QueuePurge(m.b.ctx, queue); err != nil || n != want {
		m.fatalf("purged %d, %v; want %d", n, err, want)
	}
}

func (m *model) bulk(queue string) {
	st := job.States[m.rng.IntN(len(job.States))]
	retry := m.rng.IntN(2) == 0
	want := 0
	var err error
	var n int
	if retry {
		m.op = fmt.Sprintf("retry %s jobs of %s", st, queue)
		n, err = m.b.s.JobRetryMany(m.b.ctx, &store.JobBulkParams{Queue: queue, State: st, Now: m.now})
		switch st {
		case job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled:
		default:
			if !errors.Is(err, job.ErrInvalidState) {
				m.fatalf("%v, want invalid state", err)
			}
			return
		}
		for _, j := range m.jobs {
			if j.queue == queue && j.state == st {
				m.revive(j)
				want++
			}
		}
	} else {
		m.op = fmt.Sprintf("delete %s jobs of %s", st, queue)
		n, err = m.b.s.JobDeleteMany(m.b.ctx, &store.JobBulkParams{Queue: queue, State: st, Now: m.now})
		if st == job.StateActive {
			if !errors.Is(err, job.ErrInvalidState) {
				m.fatalf("%v, want invalid state", err)
			}
			return
		}
		for id, j := range m.jobs {
			if j.queue == queue && j.state == st {
				delete(m.jobs, id)
				want++
			}
		}
	}
	if err != nil || n != want {
		m.fatalf("%d jobs, %v; want %d", n, err, want)
	}
}

func (m *model) prune() {
	m.op = "prune"
	cutoff := m.now.Add(-20 * time.Second)
	want := 0
	for id, j := range m.jobs {
		if j.state.Final() && j.finished.Before(cutoff) {
			delete(m.jobs, id)
			want++
		}
	}
	n, err := m.b.s.JobPrune(m.b.ctx, &store.JobPruneParams{CompletedBefore: cutoff, DeadBefore: cutoff, Limit: 1000})
	if err != nil || n != want {
		m.fatalf("pruned %d, %v; want %d", n, err, want)
	}
}

// compare checks every job and queue of the store against the model.
func (m *model) compare() {
	m.b.t.Helper()
	got := m.b.listAll("", "", 1000)
	if len(got) != len(m.jobs) {
		m.fatalf("store lists %d jobs, model has %d", len(got), len(m.jobs))
	}
	counts := make(map[string]map[job.State]int64)
	for _, g := range got {
		j := m.jobs[g.ID]
		if j == nil {
			m.fatalf("store lists job %s, which the model does not have", g.ID)
		}
		if counts[j.queue] == nil {
			counts[j.queue] = make(map[job.State]int64)
		}
		counts[j.queue][j.state]++
		if g.Queue != j.queue || g.State != j.state || g.Attempt != j.attempt || g.LeaseToken != j.token ||
			g.Priority != j.priority || !g.RunAt.Equal(j.runAt) || !g.LeaseExpiresAt.Equal(j.leaseExp) ||
			!g.FinishedAt.Equal(j.finished) || g.CancelRequested != j.cancel ||
			len(g.Errors)+g.ErrorsDropped != j.errs || len(g.Errors) != min(j.errs, job.LatestErrors+1) {
			m.fatalf("job %s is %+v, model says %+v", g.ID, *g, *j)
		}
	}
	for q, paused := range m.paused {
		info, err := m.b.s.QueueGet(m.b.ctx, q)
		if err != nil {
			m.fatalf("get queue %s: %v", q, err)
		}
		if info.Paused != paused {
			m.fatalf("queue %s paused %v, model says %v", q, info.Paused, paused)
		}
		for _, st := range job.States {
			if info.Counts[st] != counts[q][st] {
				m.fatalf("queue %s counts %v, model says %v", q, info.Counts, counts[q])
			}
		}
	}
}
