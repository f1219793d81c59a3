package storetest

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// randomClaim returns the parameters of a random claim: of some queues
// of the model and an unknown one, or of the lanes of one consumer group
// in some of the queues that have it; of one group now and then. A claim
// never names a queue with a maximum wait together with its dead-letter
// queue, where the copies of the jobs it kills go: whether those would be
// handed out in the same claim is the store's to decide.
func (m *model) randomClaim() *store.JobClaimParams {
	p := &store.JobClaimParams{Max: 1 + m.rng.IntN(6), Now: m.now}
	if m.rng.IntN(3) == 0 {
		p.LeaseDuration = 15 * time.Second
	}
	if m.rng.IntN(4) == 0 {
		p.Group = modelGroups[2+m.rng.IntN(len(modelGroups)-2)]
	}
	p.Runs = m.rng.IntN(3) == 0
	if cg := m.pickConsumerGroup(); cg != "" && m.rng.IntN(3) == 0 {
		for _, q := range modelLaneQueues {
			if slices.Contains(m.lanes[q], cg) && (len(p.Queues) == 0 || m.rng.IntN(2) == 0) {
				p.Queues = append(p.Queues, job.LaneName(q, cg))
			}
		}
		m.rng.Shuffle(len(p.Queues), func(i, k int) { p.Queues[i], p.Queues[k] = p.Queues[k], p.Queues[i] })
		return p
	}
	for _, q := range modelQueues {
		if m.rng.IntN(2) == 0 {
			p.Queues = append(p.Queues, q)
		}
	}
	if p.Runs && m.rng.IntN(2) == 0 {
		p.Queues = []string{"o"} // runs of the ordered queue alone
	}
	m.rng.Shuffle(len(p.Queues), func(i, k int) { p.Queues[i], p.Queues[k] = p.Queues[k], p.Queues[i] })
	letters := make(map[string]bool)
	for _, q := range p.Queues {
		if s := m.settingsOf(q); s.MaxWait > 0 && s.DeadLetterQueue != "" {
			letters[s.DeadLetterQueue] = true
		}
	}
	p.Queues = slices.DeleteFunc(p.Queues, func(q string) bool { return letters[q] })
	if m.rng.IntN(5) == 0 && len(p.Queues) > 0 {
		p.Queues = append(p.Queues, p.Queues[0]) // a queue named twice counts once
	}
	p.Queues = append(p.Queues, "unknown")
	return p
}

// claimable is the queues of names that a claim takes jobs of: known,
// not paused, each once, in the order named.
func (m *model) claimable(names []string) []string {
	var out []string
	for _, q := range names {
		_, known := m.paused[q]
		if base, cg, lane := job.SplitLane(q); lane {
			known = slices.Contains(m.lanes[base], cg)
		}
		if known && !m.pausedOf(q) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// claim claims random jobs and checks the store's answer against the
// contract: the queues without flow control first, in claim order across
// them, exactly as the model predicts; then each queue with flow control
// in the order named, as checkFlow allows; the jobs past their wait the
// claim killed, what it reports of the jobs held back, and the
// dead-letter queues that got copies.
func (m *model) claim() {
	p := m.randomClaim()
	m.op = fmt.Sprintf("claim %d of %v%s%s", p.Max, p.Queues, groupNote(p.Group), map[bool]string{true: " with runs"}[p.Runs])
	res, err := m.b.s.JobClaim(m.b.ctx, p)
	if err != nil || res == nil {
		m.fatalf("%+v, %v", res, err)
	}
	scope := m.claimable(p.Queues)
	// A claim may kill any job past its wait of the queues it names, met
	// on its way or read from a store's index of deadlines (the sweep
	// would kill it anyway); never one that may still start.
	killed := m.observeDeaths("the claim", func(j *mjob) bool {
		return slices.Contains(p.Queues, j.queue)
	})
	m.checkAvailable("claim", res.Available)
	var plain, flows []string
	for _, q := range scope {
		if m.flow(q) {
			flows = append(flows, q)
		} else {
			plain = append(plain, q)
		}
	}
	got := res.Jobs
	handed := m.checkPlain(plain, p, got)
	rest := got[handed:]
	reports := make(map[string]flowReport)
	for _, q := range flows {
		want := p.Max - handed
		if want <= 0 {
			break
		}
		k := 0
		for k < len(rest) && rest[k].Queue == q {
			k++
		}
		reports[q] = m.checkFlow(q, want, p.Group, p.Runs, rest[:k], killed[q])
		rest, handed = rest[k:], handed+k
	}
	if len(rest) > 0 {
		m.fatalf("claim handed out %v; %v of them out of place (queues %v without flow control, then %v)",
			idsOf(got), idsOf(rest), plain, flows)
	}
	m.checkHeld(res, reports)
	m.handOut(got, p.LeaseDuration)
}

// checkPlain checks the first jobs of got against the claim p of the
// queues without flow control, plain: the first jobs in claim order
// across them that may start, as many as p wants. It returns how many it
// checked. A claim that handed out a job of such a queue, or ran short,
// met the jobs at the head of each queue: none of those may be left past
// their wait.
func (m *model) checkPlain(plain []string, p *store.JobClaimParams, got []*job.Job) int {
	m.b.t.Helper()
	var ready, heads []*mjob
	head := make(map[string]*mjob)
	for _, j := range m.jobs {
		if j.state != job.StateAvailable || !slices.Contains(plain, j.queue) || (p.Group != "" && j.group != p.Group) {
			continue
		}
		if h := head[j.queue]; h == nil || claimOrder(j, h) {
			head[j.queue] = j
		}
		if !m.stale(j) {
			ready = append(ready, j)
		}
	}
	sort.Slice(ready, func(i, k int) bool { return claimOrder(ready[i], ready[k]) })
	n := min(p.Max, len(ready))
	if len(got) < n {
		m.fatalf("claimed %v, want %v first", idsOf(got), mids(ready[:n]))
	}
	for i, j := range ready[:n] {
		if got[i].ID != j.id {
			m.fatalf("claimed %v; job %d is %s, want %s (want %v first)", idsOf(got), i, got[i].ID, j.id, mids(ready[:n]))
		}
	}
	for _, q := range plain {
		h := head[q]
		if h == nil || !m.stale(h) {
			continue
		}
		if n < p.Max || slices.ContainsFunc(ready[:n], func(j *mjob) bool { return j.queue == q }) {
			heads = append(heads, h)
		}
	}
	if len(heads) > 0 {
		m.fatalf("claimed %v and left %v, past their wait at the heads of their queues, alive", idsOf(got), mids(heads))
	}
	return n
}

// checkHeld checks what a claim reported of the jobs held back against
// the reports of the queues with flow control it reached.
func (m *model) checkHeld(res *store.ClaimResult, reports map[string]flowReport) {
	m.b.t.Helper()
	capped := make(map[string]bool)
	for _, q := range res.Capped {
		if capped[q] {
			m.fatalf("queue %s named twice in Capped %v", q, res.Capped)
		}
		capped[q] = true
		if rep, ok := reports[q]; !ok || !rep.mayCap {
			m.fatalf("Capped %v names %s, where no cap held available jobs back; claimed %v\n%s", res.Capped, q, idsOf(res.Jobs), m.describe(q))
		}
	}
	var must time.Time
	var may []time.Time
	for q, rep := range reports {
		if rep.mustCap && !capped[q] {
			m.fatalf("Capped %v lacks %s, where a cap held available jobs back; claimed %v\n%s", res.Capped, q, idsOf(res.Jobs), m.describe(q))
		}
		for _, t := range rep.mustRetry {
			if must.IsZero() || t.Before(must) {
				must = t
			}
		}
		may = append(may, rep.mayRetry...)
	}
	switch {
	case !must.IsZero() && (res.RetryAt.IsZero() || res.RetryAt.After(must)):
		m.fatalf("RetryAt %v; a rate held jobs back that lets one start at %v", res.RetryAt, must)
	case !res.RetryAt.IsZero() && !slices.ContainsFunc(may, res.RetryAt.Equal):
		m.fatalf("RetryAt %v, when no rate at its limit lets a job start (those that do: %v)", res.RetryAt, may)
	}
}

// handOut applies to the model the claim of got, checking each job's
// attempt, token and lease, with lease in place of the jobs' own when set.
func (m *model) handOut(got []*job.Job, lease time.Duration) {
	m.b.t.Helper()
	started := make(map[[2]string]int)
	for _, g := range got {
		j := m.jobs[g.ID]
		j.state, j.attempt = job.StateActive, j.attempt+1
		d := j.lease
		if lease > 0 {
			d = lease
		}
		j.leaseExp = m.now.Add(d)
		if g.Attempt != j.attempt || g.LeaseToken <= j.token || !g.LeaseExpiresAt.Equal(j.leaseExp) {
			m.fatalf("claimed %s with attempt %d, token %d, lease until %v; want %d, above %d, %v",
				j.id, g.Attempt, g.LeaseToken, g.LeaseExpiresAt, j.attempt, j.token, j.leaseExp)
		}
		j.token = g.LeaseToken
		started[[2]string{j.queue, j.group}]++
	}
	for k, n := range started {
		m.recordStarts(k[0], k[1], n)
	}
}
