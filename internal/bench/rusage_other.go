//go:build !unix

package bench

import "time"

// selfUsage is not available on this platform.
func selfUsage() (cpu time.Duration, peakRSS int64, ok bool) { return 0, 0, false }
