package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	t.Parallel()
	prevHi := int64(-1)
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, prevHi+1)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d,%d] maps to %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its start", i, lo, hi, subBuckets)
		}
		prevHi = hi
	}
	if prevHi != math.MaxInt64 {
		t.Fatalf("last bucket ends at %d, want MaxInt64", prevHi)
	}
}

func TestPercentileEmpty(t *testing.T) {
	t.Parallel()
	h := NewHistogram()
	if got := h.Percentile(0.5); got != 0 {
		t.Fatalf("empty p50 = %v, want 0", got)
	}
	if h.Stats() != nil {
		t.Fatal("empty histogram has stats")
	}
}

func TestPercentileSingleValue(t *testing.T) {
	t.Parallel()
	h := NewHistogram()
	h.Record(1234567 * time.Nanosecond)
	for _, p := range []float64{0, 0.5, 0.99, 0.999, 1} {
		if got := h.Percentile(p); got != 1234567 {
			t.Fatalf("p%v = %v, want the only value", p, got)
		}
	}
	s := h.Stats()
	if s.Count != 1 || s.Avg != 1.234567 || s.Max != 1.234567 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestPercentileSmallValuesExact(t *testing.T) {
	t.Parallel()
	h := NewHistogram()
	for v := 1; v <= 100; v++ {
		h.Record(time.Duration(v))
	}
	// Nearest rank: p50 of 1..100 is the 50th value, p99 the 99th.
	for p, want := range map[float64]time.Duration{0.5: 50, 0.99: 99, 0.999: 100, 0.01: 1, 0.011: 2} {
		if got := h.Percentile(p); got != want {
			t.Errorf("p%v = %d, want %d", p, got, want)
		}
	}
}

// TestPercentileMatchesExactRank compares the histogram with exact
// nearest-rank percentiles of a skewed sample.
func TestPercentileMatchesExactRank(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	h := NewHistogram()
	vals := make([]int64, 100_000)
	for i := range vals {
		// Log-normal-ish: mostly around 1 ms with a long tail.
		v := int64(math.Exp(r.NormFloat64()*1.2) * 1e6)
		vals[i] = v
		h.Record(time.Duration(v))
	}
	slices.Sort(vals)
	for _, p := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(math.Ceil(p*float64(len(vals))))-1]
		got := int64(h.Percentile(p))
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.004 {
			t.Errorf("p%v = %d, exact %d (off by %.3f%%)", p, got, want, rel*100)
		}
	}
	var sum int64
	for _, v := range vals {
		sum += v
	}
	s := h.Stats()
	if s.Count != int64(len(vals)) {
		t.Fatalf("count %d", s.Count)
	}
	if want := ms(time.Duration(sum / int64(len(vals)))); math.Abs(s.Avg-want) > 1e-9 {
		t.Errorf("avg %v, want %v", s.Avg, want)
	}
	if s.Max != ms(time.Duration(vals[len(vals)-1])) {
		t.Errorf("max %v, want %v", s.Max, ms(time.Duration(vals[len(vals)-1])))
	}
	if !(s.P50 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Errorf("percentiles not ordered: %+v", s)
	}
}

func TestPercentileUniform(t *testing.T) {
	t.Parallel()
	h := NewHistogram()
	for v := 1; v <= 10_000; v++ {
		h.Record(time.Duration(v) * time.Microsecond)
	}
	for p, want := range map[float64]float64{0.5: 5000, 0.99: 9900, 0.999: 9990} {
		got := float64(h.Percentile(p)) / float64(time.Microsecond)
		if math.Abs(got-want)/want > 0.004 {
			t.Errorf("p%v = %.1fµs, want %.0fµs", p, got, want)
		}
	}
}

func TestRecordConcurrent(t *testing.T) {
	t.Parallel()
	h := NewHistogram()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 1000; i++ {
				h.Record(time.Duration(i) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if h.Count() != 8000 {
		t.Fatalf("count %d", h.Count())
	}
	if got := h.Percentile(1); got != time.Second {
		t.Fatalf("max %v", got)
	}
	if got := h.Percentile(0); got != time.Millisecond {
		t.Fatalf("min %v", got)
	}
	h.Record(-time.Second)
	if got := h.Percentile(0); got != 0 {
		t.Fatalf("negative not clamped: %v", got)
	}
}
