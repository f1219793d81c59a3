//go:build unix

package bench

import "testing"

func TestSelfUsage(t *testing.T) {
	t.Parallel()
	cpu, peak, ok := selfUsage()
	if !ok || cpu <= 0 || peak <= 0 {
		t.Fatalf("getrusage: cpu %v, peak %d, ok %v", cpu, peak, ok)
	}
}
