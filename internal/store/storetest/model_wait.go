package storetest

import (
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Maximum waits and dead letters in the model. Which jobs past their
// wait a claim or a sweep kills, beyond those it must, is the store's
// choice: the model reads the deaths from the store after the call,
// checks that each was due, and follows.

// settingsOf is the settings of queue q; a lane has none of its own.
func (m *model) settingsOf(q string) job.QueueSettings {
	if _, _, lane := job.SplitLane(q); lane {
		return job.QueueSettings{}
	}
	return m.settings[q]
}

// stale reports whether j is available and past its queue's maximum
// wait: no claim may hand it out.
func (m *model) stale(j *mjob) bool {
	return j.state == job.StateAvailable && job.PastMaxWait(j.attempt, j.runAt, m.settingsOf(j.queue).MaxWait, m.now)
}

// setSettings gives a random queue a maximum wait, a dead-letter queue,
// both or neither: a and b may name each other.
func (m *model) setSettings() {
	q := []string{"a", "b", "c", "o"}[m.rng.IntN(4)]
	var s job.QueueSettings
	if m.rng.IntN(3) != 0 {
		s.MaxWait = []time.Duration{4 * time.Second, 12 * time.Second, 30 * time.Second}[m.rng.IntN(3)]
	}
	if dlqs := modelDeadLetters[q]; m.rng.IntN(3) != 0 {
		s.DeadLetterQueue = dlqs[m.rng.IntN(len(dlqs))]
	}
	m.op = fmt.Sprintf("set settings of %s: %s", q, s)
	if err := m.b.s.QueueSetSettings(m.b.ctx, q, s); err != nil {
		m.fatalf("%v", err)
	}
	m.settings[q] = s
	if _, ok := m.paused[q]; !ok {
		m.paused[q] = false
	}
}

// observeDeaths reads the jobs the store killed in the last call, what
// for naming it: each a job the model holds available, past its wait,
// for which inScope is true. It kills them in the model and counts them
// by queue and group.
func (m *model) observeDeaths(what string, inScope func(*mjob) bool) map[string]map[string]int {
	m.b.t.Helper()
	killed := make(map[string]map[string]int)
	for _, g := range m.b.listAll("", job.StateDead, 1000) {
		j := m.jobs[g.ID]
		if j == nil || j.state != job.StateAvailable {
			continue // compare tells
		}
		if !m.stale(j) || !inScope(j) {
			m.fatalf("%s killed job %s of %s (attempt %d, due %v), which may still start or was out of its reach",
				what, j.id, j.queue, j.attempt, j.runAt.Sub(t0))
		}
		_, e := job.AfterMaxWait(j.attempt, m.now)
		m.recordError(j, e.Attempt, e.Message)
		m.finish(j, job.StateDead)
		if killed[j.queue] == nil {
			killed[j.queue] = make(map[string]int)
		}
		killed[j.queue][j.group]++
	}
	return killed
}

// checkAvailable checks the queues a call named as given copies against
// the dead-letter copies the model expects of it.
func (m *model) checkAvailable(what string, got []string) {
	m.b.t.Helper()
	want := make(map[string]bool)
	for _, e := range m.expect {
		want[e.dlq] = true
	}
	have := make(map[string]bool)
	for _, q := range got {
		if have[q] {
			m.fatalf("%s names %s twice in %v", what, q, got)
		}
		have[q] = true
	}
	if !sameSet(have, want) {
		m.fatalf("%s names %v as given dead-letter copies, want %v", what, got, want)
	}
}

// sweep kills the jobs past their wait, all of them or a few: those it
// kills are the store's choice.
func (m *model) sweep() {
	limit := []int{1, 2, 1000}[m.rng.IntN(3)]
	m.op = fmt.Sprintf("expire waiting jobs (up to %d)", limit)
	due, soonest := 0, time.Time{}
	for _, j := range m.jobs {
		if m.stale(j) {
			due++
		}
		if d := job.WaitDeadline(j.attempt, j.runAt, m.settingsOf(j.queue).MaxWait); j.state == job.StateAvailable &&
			!d.IsZero() && d.After(m.now) && (soonest.IsZero() || d.Before(soonest)) {
			soonest = d
		}
	}
	res, err := m.b.s.JobExpireWaiting(m.b.ctx, m.now, limit)
	if err != nil {
		m.fatalf("%v", err)
	}
	killed := 0
	for _, byGroup := range m.observeDeaths("the sweep", func(*mjob) bool { return true }) {
		for _, n := range byGroup {
			killed += n
		}
	}
	if res.Count != killed || killed != min(due, limit) {
		m.fatalf("the sweep reports %d killed and killed %d, of %d past their wait", res.Count, killed, due)
	}
	m.checkAvailable("the sweep", res.Available)
	if !res.Next.IsZero() && (!res.Next.After(m.now) || (!soonest.IsZero() && res.Next.After(soonest))) {
		m.fatalf("the sweep's next deadline is %v, the model's soonest %v", res.Next, soonest)
	}
}
