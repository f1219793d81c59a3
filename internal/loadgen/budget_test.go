package loadgen

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestBudgetHandsOutExactlyItsJobs(t *testing.T) {
	t.Parallel()
	b := NewBudget(10_050)
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := b.Take(100)
				if n == 0 {
					return
				}
				if n > 100 {
					t.Errorf("took %d, more than the most asked, 100", n)
				}
				if n == 100 && taken.Load()%300 == 0 {
					b.Return(1)
					n--
				}
				taken.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	if got := taken.Load(); got != 10_050 || b.Left() != 0 {
		t.Fatalf("took %d with %d left, want 10050 and 0", got, b.Left())
	}
}
