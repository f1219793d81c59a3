package job

import (
	"math"
	"time"
)

// BackoffKind names how the delay between attempts grows.
type BackoffKind string

// The backoff kinds.
const (
	// BackoffFixed waits Base between every attempt (plus jitter).
	BackoffFixed BackoffKind = "fixed"
	// BackoffExponential waits Base·2^(attempt-1), capped at Max (plus jitter).
	BackoffExponential BackoffKind = "exponential"
)

// Backoff is the retry delay policy of a job.
type Backoff struct {
	// Kind is fixed or exponential. Defaults to exponential.
	Kind BackoffKind
	// Base is the first delay. Defaults to 1s.
	Base time.Duration
	// Max caps the delay. Defaults to 1h.
	Max time.Duration
	// Jitter spreads each delay at random by up to this fraction of it, in
	// [0,1]: a delay d becomes a value in [d·(1-Jitter), d]. Defaults to 0.2.
	Jitter float64
}

// Delay is the wait before the attempt after failed attempt number attempt
// (1-based). rnd returns a uniform value in [0,1) and decides the jitter; nil
// means no jitter. The result is never negative and never above Max (when
// Max is set).
func (b Backoff) Delay(attempt int, rnd func() float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := b.Base
	if b.Kind != BackoffFixed {
		exp := float64(b.Base) * math.Pow(2, float64(attempt-1))
		if b.Max > 0 && exp > float64(b.Max) || exp > float64(math.MaxInt64/2) {
			exp = float64(b.Max)
		}
		d = time.Duration(exp)
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	if rnd != nil && b.Jitter > 0 {
		d -= time.Duration(float64(d) * b.Jitter * rnd())
	}
	if d < 0 {
		d = 0
	}
	return d
}
