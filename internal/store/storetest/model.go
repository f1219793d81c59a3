package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
var modelSeeds = []uint64{6661828786723815283, 7867749701326483747, 4941575286406635048, 1, 2, 3, 4, 8414030082721589302, 12544774761695590, 16357571949874080954}

// modelSteps is how many random operations one seed runs.
const modelSteps = 300

// mjob is what the contract says a store holds for one job.
type mjob struct {
	id, queue, key       string
	group                string
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
	// the latest of them (job.BoundErrors). lastErr is the latest.
	errs    int
	lastErr job.AttemptError
	// letterOf names the dead job a dead-letter copy copies; zero for a
	// job that is no such copy.
	letterOf job.JobRef
}

// model is a reference implementation of the contract, kept beside the
// store under test: every operation is applied to both, and their answers
// and states compared. Where the contract leaves a choice to the store
// (which group a round-robin serves first, which jobs past their wait a
// claim or a sweep kills beyond those it must), the model checks that
// the store's choice is one the contract allows, then follows it.
type model struct {
	b    *bundle
	rng  *rand.Rand
	seed uint64
	step int
	op   string
	now  time.Time
	seq  int
	jobs map[string]*mjob
	// paused holds every known queue (lanes are known through lanes).
	paused map[string]bool
	ids    []string // every id ever inserted, deleted ones too
	// limits and settings of the queues that have some; a lane takes its
	// queue's limits and pause, and has no settings.
	limits   map[string]job.Limits
	settings map[string]job.QueueSettings
	// rates are each limited queue's rate and group rate, drawn once a
	// seed (see begin) and kept by every change of its limits.
	rates map[string]job.Limits
	// grouped holds the queues that ever had a job with a group.
	grouped map[string]bool
	// starts are the start times of each queue's jobs, and of each
	// group's, oldest first, as far back as a rate can look.
	starts      map[string][]time.Time
	groupStarts map[string]map[string][]time.Time
	// lanes are the consumer groups of each queue, in creation order;
	// lanesMade counts the groups ever created, which name new ones.
	lanes     map[string][]string
	lanesMade int
	// history names the latest steps, for a failure's message.
	history []string
	// expect are the dead-letter copies the current operation must have
	// made (see finish and adopt).
	expect []*expectedCopy
}

// The queues of the model and their roles: a and b have limits (a always
// some, so that its consumer groups' lanes always have flow control), c
// is a plain queue whose jobs have no group, o is ordered, and d takes
// dead-letter copies. a and b may name each other as dead-letter queues.
var (
	modelQueues      = []string{"a", "b", "c", "o", "d"}
	modelQueueWeight = []int{3, 2, 2, 3, 1}
	modelGroups      = []string{"", "", "t1", "t2", "t3"}
	modelDeadLetters = map[string][]string{"a": {"b", "d"}, "b": {"a"}, "c": {"d"}, "o": {"d"}}
	modelLaneQueues  = []string{"a", "o"}
)

// modelHistory is how many of the latest steps a failure names.
const modelHistory = 40

// modelBackoff is the retry delay of every model job.
const modelBackoff = 5 * time.Second

// testModel runs random operations against a fresh store and the model
// for each seed, comparing them after every step.
func testModel(b *bundle) {
	for _, seed := range append(slices.Clone(modelSeeds), rand.Uint64()) {
		b.t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := &model{b: setup(t, b.h), rng: rand.New(rand.NewPCG(seed, 99)), seed: seed, now: t0,
				jobs: make(map[string]*mjob), paused: make(map[string]bool), limits: make(map[string]job.Limits),
				settings: make(map[string]job.QueueSettings), rates: make(map[string]job.Limits),
				grouped: make(map[string]bool), starts: make(map[string][]time.Time),
				groupStarts: make(map[string]map[string][]time.Time), lanes: make(map[string][]string)}
			m.begin()
			m.compare()
			for m.step = 1; m.step <= modelSteps; m.step++ {
				m.randomStep()
				m.compare()
				m.history = append(m.history[max(0, len(m.history)-modelHistory+1):], fmt.Sprintf("%d %v %s", m.step, m.now.Sub(t0), m.op))
			}
		})
	}
}

// fatalf fails the test, naming the seed and step to replay.
func (m *model) fatalf(format string, args ...any) {
	m.b.t.Helper()
	m.b.t.Fatalf("model seed %d step %d (%s) at %v: %s\nthe steps before:\n\t%s", m.seed, m.step, m.op, m.now.Sub(t0),
		fmt.Sprintf(format, args...), strings.Join(m.history, "\n\t"))
}

// begin draws the rates of the limited queues, sets their limits, and
// gives each of them a job with a group, so that every store holds them
// for queues with flow control from the first claim on.
func (m *model) begin() {
	m.op = "begin"
	for _, q := range []string{"a", "b", "o"} {
		r := job.Limits{}
		switch m.rng.IntN(3) {
		case 1:
			r.Rate = job.Rate{Limit: 2, Period: 10 * time.Second}
		case 2:
			r.Rate = job.Rate{Limit: 3, Period: 6 * time.Second}
		}
		switch m.rng.IntN(3) {
		case 1:
			r.GroupRate = job.Rate{Limit: 1, Period: 5 * time.Second}
		case 2:
			r.GroupRate = job.Rate{Limit: 2, Period: 10 * time.Second}
		}
		if q == "o" && m.rng.IntN(2) == 0 {
			r = job.Limits{} // runs as long as the group's jobs
		}
		m.rates[q] = r
		m.setLimits(q)
	}
	var ps []store.JobInsertParams
	for _, q := range []string{"a", "b", "o"} {
		p := m.randomJob(q)
		p.Group = "t1"
		ps = append(ps, p)
	}
	m.insertJobs(ps)
}

func (m *model) randomStep() {
	m.now = m.now.Add(time.Duration(m.rng.IntN(4)) * time.Second)
	queue := modelQueues[m.rng.IntN(len(modelQueues))]
	switch r := m.rng.IntN(100); {
	case r < 18:
		m.insert()
	case r < 40:
		m.claim()
	case r < 58:
		m.outcome()
	case r < 61:
		m.cancel()
	case r < 64:
		m.retry()
	case r < 66:
		m.delete()
	case r < 71:
		m.promote()
	case r < 75:
		m.rescue()
	case r < 77:
		m.setPaused(queue, m.rng.IntN(3) == 0)
	case r < 78:
		m.purge(queue)
	case r < 80:
		m.bulk(queue)
	case r < 82:
		m.prune()
	case r < 86:
		m.setLimits([]string{"a", "b", "o"}[m.rng.IntN(3)])
	case r < 90:
		m.setSettings()
	case r < 94:
		m.sweep()
	case r < 97:
		m.consumerGroup()
	default:
		m.op = "advance the clock"
		m.now = m.now.Add(time.Duration(5+m.rng.IntN(20)) * time.Second)
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

// pickQueue returns a queue of the model by the queues' weights.
func (m *model) pickQueue() string {
	total := 0
	for _, w := range modelQueueWeight {
		total += w
	}
	r := m.rng.IntN(total)
	for i, w := range modelQueueWeight {
		if r < w {
			return modelQueues[i]
		}
		r -= w
	}
	return modelQueues[0]
}

// randomJob returns the parameters of a random job of queue: a group in
// the queues whose jobs have groups, a priority, a run time in the past
// or a schedule, attempts, a lease, a unique key sometimes, and now and
// then the id of a job inserted before.
func (m *model) randomJob(queue string) store.JobInsertParams {
	p := newJob(queue)
	if queue != "c" && queue != "d" {
		p.Group = modelGroups[m.rng.IntN(len(modelGroups))]
	}
	p.Priority = m.rng.IntN(4) - 1
	p.RunAt = m.now.Add(-time.Duration(m.rng.IntN(3)) * time.Second)
	if queue == "o" && m.rng.IntN(2) == 0 {
		// Jobs in enqueue order, which runs take together.
		p.Priority, p.RunAt = 0, m.now
	}
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
		if id := m.ids[m.rng.IntN(len(m.ids))]; !strings.Contains(id, job.LaneSep) {
			p.ID = id
			if j := m.jobs[p.ID]; j != nil && m.rng.IntN(4) != 0 {
				p.Queue, p.Group = j.queue, j.group // mostly a retried enqueue; else an id taken
			}
		}
	}
	return p
}

func (m *model) insert() {
	n := 1 + m.rng.IntN(4)
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = m.randomJob(m.pickQueue())
	}
	if m.rng.IntN(6) == 0 {
		// A group's events in order, as an ordered queue's runs take them.
		g := modelGroups[1+m.rng.IntN(len(modelGroups)-1)]
		for range 2 + m.rng.IntN(4) {
			p := m.randomJob("o")
			p.ID, p.Queue, p.Group, p.Priority, p.RunAt, p.State = job.NewID(m.now), "o", g, 0, m.now, job.StateAvailable
			ps = append(ps, p)
		}
	}
	m.insertJobs(ps)
}

// insertJobs inserts ps in one batch into the store and the model, with
// the copies each new job gives the consumer groups of its queue.
func (m *model) insertJobs(ps []store.JobInsertParams) {
	m.op = "insert"
	res, err := m.b.s.JobInsertMany(m.b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: m.now})
	if taken := m.takenIDs(ps); len(taken) > 0 {
		var e *job.IDTakenError
		if !errors.As(err, &e) || !errors.Is(err, job.ErrIDTaken) || !taken[e.Field] {
			m.fatalf("%d results, %v; want an id taken error on one of %v", len(res), err, taken)
		}
		return
	}
	if err != nil || len(res) != len(ps) {
		m.fatalf("%d results, %v", len(res), err)
	}
	for i, p := range ps {
		dup := m.duplicate(&p)
		if dup == nil {
			m.add(&mjob{id: p.ID, queue: p.Queue, key: p.UniqueKey, group: p.Group, priority: p.Priority,
				state: p.State, runAt: p.RunAt, created: m.now, maxAttempts: p.MaxAttempts, lease: p.LeaseDuration})
			for _, cg := range m.lanes[p.Queue] {
				if m.jobs[job.CopyID(p.ID, cg)] != nil {
					continue // the copy of a job deleted since, under the same id, stays
				}
				m.add(&mjob{id: job.CopyID(p.ID, cg), queue: job.LaneName(p.Queue, cg), group: p.Group,
					priority: p.Priority, state: p.State, runAt: p.RunAt, created: m.now, maxAttempts: p.MaxAttempts,
					lease: p.LeaseDuration})
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

// add puts the new job j into the model, next in enqueue order; its
// queue becomes known, and grouped if j has a group.
func (m *model) add(j *mjob) {
	m.seq++
	j.seq = m.seq
	m.jobs[j.id] = j
	m.ids = append(m.ids, j.id)
	if j.group != "" {
		m.grouped[j.queue] = true
	}
	if _, _, lane := job.SplitLane(j.queue); !lane {
		if _, ok := m.paused[j.queue]; !ok {
			m.paused[j.queue] = false
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

// outcome completes, fails, releases or extends a job, with its current
// token mostly, or with a wrong one or on a job not active.
func (m *model) outcome() {
	kinds := []string{"complete", "fail", "fail for good", "release", "extend"}
	kind := kinds[m.rng.IntN(len(kinds))]
	m.op = kind
	j := m.pick(func(j *mjob) bool { return j.state == job.StateActive })
	if m.rng.IntN(2) == 0 {
		// Now and then a job of a run with more of it out after it.
		if h := m.pick(m.aheadInRun); h != nil {
			j = h
		}
	}
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
	m.op = kind + " " + j.id
	var o job.Outcome
	switch kind {
	case "complete":
		o = m.b.complete(m.now, job.CompleteItem{ID: j.id, Token: token})[0]
	case "fail", "fail for good":
		o = m.b.fail(m.now, job.FailItem{ID: j.id, Token: token, Message: "x", NoRetry: kind == "fail for good"})[0]
	case "release":
		o = m.b.release(m.now, job.ReleaseItem{ID: j.id, Token: token})[0]
	case "extend":
		o = m.b.extend(m.now, job.ExtendItem{ID: j.id, Token: token})[0]
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
		m.recordError(j, j.attempt, "x")
		switch {
		case j.cancel:
			m.finish(j, job.StateCancelled)
		case kind == "fail for good" || j.attempt >= j.maxAttempts:
			m.finish(j, job.StateDead)
		default:
			j.state, j.runAt, j.leaseExp = job.StateRetrying, m.now.Add(modelBackoff), time.Time{}
		}
		m.returnRun(j)
		m.wantLetter(o.DeadLetter)
	case "release":
		j.attempt--
		if j.cancel {
			m.finish(j, job.StateCancelled)
		} else {
			j.state, j.leaseExp = job.StateAvailable, time.Time{}
		}
		m.returnRun(j)
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

// aheadInRun reports whether j is an active job of an ordered queue with
// a later job of its group active too: the rest of a run.
func (m *model) aheadInRun(j *mjob) bool {
	if j.state != job.StateActive || j.group == "" || !m.limitsOf(j.queue).Ordered {
		return false
	}
	for _, o := range m.jobs {
		if o.queue == j.queue && o.group == j.group && o.state == job.StateActive && o.seq > j.seq {
			return true
		}
	}
	return false
}

// recordError records the error message of attempt on j now.
func (m *model) recordError(j *mjob, attempt int, message string) {
	j.errs++
	j.lastErr = job.AttemptError{Attempt: attempt, Message: message, At: m.now}
}

// finish moves j to final state st now; a cancel request still ends it
// cancelled. A death leaves the copy its queue's settings call for (see
// job.QueueSettings.DeadLetterFor), which the operation must have made.
func (m *model) finish(j *mjob, st job.State) {
	if j.cancel && st == job.StateCompleted {
		st = job.StateCancelled
	}
	j.state, j.finished, j.leaseExp = st, m.now, time.Time{}
	if dlq := m.settingsOf(j.queue).DeadLetterFor(st, !j.letterOf.IsZero()); dlq != "" {
		m.expect = append(m.expect, &expectedCopy{dead: *j, dlq: dlq})
	}
}
