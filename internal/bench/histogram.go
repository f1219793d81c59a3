package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram layout: values below 2^subBits nanoseconds have a bucket each;
// above that, every power of two is split into 2^subBits buckets, so a
// bucket's width is at most 1/2^subBits of its lower bound and a reported
// percentile is within 0.4 % of the true one. The layout covers every
// non-negative int64 in a fixed 58 KiB, however long the run.
const (
	subBits    = 7
	subBuckets = 1 << subBits
	numBuckets = (64 - subBits) * subBuckets
)

// Histogram records durations for percentiles. It is safe for concurrent
// use: Record is a few atomic adds, so many goroutines can share one
// without a lock.
type Histogram struct {
	counts [numBuckets]atomic.Int64
	count  atomic.Int64
	sum    atomic.Int64
	min    atomic.Int64
	max    atomic.Int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

// bucketOf is the index of the bucket that holds v (v >= 0).
func bucketOf(v int64) int {
	if v < subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits
	return (shift+1)*subBuckets + int(v>>uint(shift)) - subBuckets
}

// bucketBounds are the smallest and largest values of bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < subBuckets {
		return int64(i), int64(i)
	}
	shift := uint(i/subBuckets - 1)
	m := int64(i%subBuckets + subBuckets)
	return m << shift, (m+1)<<shift - 1
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)].Add(1)
	h.count.Add(1)
	h.sum.Add(v)
	for cur := h.min.Load(); v < cur && !h.min.CompareAndSwap(cur, v); cur = h.min.Load() {
	}
	for cur := h.max.Load(); v > cur && !h.max.CompareAndSwap(cur, v); cur = h.max.Load() {
	}
}

// Count is the number of recorded durations.
func (h *Histogram) Count() int64 { return h.count.Load() }

// Percentile returns the duration at or below which a fraction p (0 to 1)
// of the recordings lie, by nearest rank: the value of rank ceil(p·n). It
// is the midpoint of the bucket holding that rank, clamped to the smallest
// and largest recordings, so it is exact for values under 128 ns and for
// p = 0 or 1, and within 0.4 % otherwise. An empty histogram returns 0.
func (h *Histogram) Percentile(p float64) time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	lo, hi := h.min.Load(), h.max.Load()
	if p <= 0 {
		return time.Duration(lo)
	}
	if p >= 1 {
		return time.Duration(hi)
	}
	rank := max(int64(math.Ceil(p*float64(n))), 1)
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			blo, bhi := bucketBounds(i)
			mid := blo + (bhi-blo)/2
			return time.Duration(min(max(mid, lo), hi))
		}
	}
	return time.Duration(hi)
}

// Stats summarizes the histogram in milliseconds; nil when it is empty.
func (h *Histogram) Stats() *LatencyStats {
	n := h.count.Load()
	if n == 0 {
		return nil
	}
	return &LatencyStats{
		Count: n,
		Avg:   ms(time.Duration(h.sum.Load() / n)),
		P50:   ms(h.Percentile(0.50)),
		P99:   ms(h.Percentile(0.99)),
		P999:  ms(h.Percentile(0.999)),
		Max:   ms(time.Duration(h.max.Load())),
	}
}

// LatencyStats are the percentiles of one kind of latency, in
// milliseconds: the mean, the median, the 99th and 99.9th percentiles (by
// nearest rank) and the largest, over Count recordings.
type LatencyStats struct {
	Count int64   `json:"count"`
	Avg   float64 `json:"avg_ms"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
