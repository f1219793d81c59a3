package loadgen

import "sync/atomic"

// Budget is a number of jobs that workers fetch between them: shared, so
// that together they fetch exactly that many, however their fetches
// interleave. It is safe for concurrent use.
type Budget struct {
	left atomic.Int64
}

// NewBudget returns a budget of jobs.
func NewBudget(jobs int64) *Budget {
	b := &Budget{}
	b.left.Store(jobs)
	return b
}

// Take takes up to most jobs from the budget and returns how many it took;
// 0 when none are left.
func (b *Budget) Take(most int) int {
	for {
		l := b.left.Load()
		if l <= 0 {
			return 0
		}
		n := min(l, int64(most))
		if b.left.CompareAndSwap(l, l-n) {
			return int(n)
		}
	}
}

// Return gives back n jobs taken but not fetched.
func (b *Budget) Return(n int) { b.left.Add(int64(n)) }

// Left is how many jobs are left to take.
func (b *Budget) Left() int64 { return b.left.Load() }
