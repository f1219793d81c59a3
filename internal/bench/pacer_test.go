package bench

import (
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestPacerDueTimes(t *testing.T) {
	t.Parallel()
	p := newPacer(epoch, 1000, 0, 0)
	for want := int64(0); want < 5000; want++ {
		i, at, ok := p.Next()
		if !ok || i != want {
			t.Fatalf("Next = %d, %v; want %d, true", i, ok, want)
		}
		if d := at.Sub(epoch); d != time.Duration(want)*time.Millisecond {
			t.Fatalf("request %d due at +%v, want +%v", i, d, time.Duration(want)*time.Millisecond)
		}
	}
	if p.Total() != -1 {
		t.Fatalf("unbounded pacer total %d", p.Total())
	}
}

func TestPacerFractionalRate(t *testing.T) {
	t.Parallel()
	// 3 a second: 0, 333.33 ms, 666.67 ms, 1 s — no drift from rounding.
	p := newPacer(epoch, 3, 0, 0)
	if got := p.due(3).Sub(epoch); got != time.Second {
		t.Fatalf("request 3 due at +%v, want +1s", got)
	}
	if got := p.due(3000).Sub(epoch); got != 1000*time.Second {
		t.Fatalf("request 3000 due at +%v, want +1000s", got)
	}
}

func TestPacerStopsAtLimit(t *testing.T) {
	t.Parallel()
	p := newPacer(epoch, 500, 7, time.Hour)
	n := 0
	for {
		if _, _, ok := p.Next(); !ok {
			break
		}
		n++
	}
	if n != 7 || p.Total() != 7 {
		t.Fatalf("handed out %d (total %d), want 7", n, p.Total())
	}
	if _, _, ok := p.Next(); ok {
		t.Fatal("Next after the end returned ok")
	}
}

func TestPacerStopsAtDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate float64
		d    time.Duration
		want int64
	}{
		{1000, time.Second, 1000},         // due times 0 … 999 ms
		{3, time.Second, 3},               // 0, 333, 666 ms
		{7, 1500 * time.Millisecond, 11},  // 0 … 1428 ms
		{0.5, 10 * time.Second, 5},        // every 2 s
		{100, 10*time.Millisecond + 1, 2}, // 0 and 10 ms
		{100, 10 * time.Millisecond, 1},   // 10 ms is not before the end
		{1e6, time.Millisecond, 1000},     // high rate
		{250, 0, -1},                      // unbounded
		{2000, 2 * time.Second / 3, 1334}, // 666.67 ms
	} {
		p := newPacer(epoch, tc.rate, 0, tc.d)
		if got := p.Total(); got != tc.want {
			t.Errorf("rate %v for %v: Total %d, want %d", tc.rate, tc.d, got, tc.want)
		}
		if tc.want < 0 {
			continue
		}
		var n int64
		var last time.Time
		for {
			_, at, ok := p.Next()
			if !ok {
				break
			}
			if !at.Before(epoch.Add(tc.d)) {
				t.Fatalf("rate %v for %v: request due at +%v, past the end", tc.rate, tc.d, at.Sub(epoch))
			}
			last = at
			n++
		}
		if n != tc.want {
			t.Errorf("rate %v for %v: handed out %d, want %d (last at +%v)", tc.rate, tc.d, n, tc.want, last.Sub(epoch))
		}
	}
}

// TestPacerConcurrentSenders checks that many senders together get every
// index exactly once and nothing past the bound.
func TestPacerConcurrentSenders(t *testing.T) {
	t.Parallel()
	const total = 20_000
	p := newPacer(epoch, 1e5, total, 0)
	seen := make([]int32, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, at, ok := p.Next()
				if !ok {
					return
				}
				if at != p.due(i) {
					t.Errorf("request %d due %v, want %v", i, at, p.due(i))
				}
				mu.Lock()
				seen[i]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("request %d handed out %d times", i, n)
		}
	}
}
