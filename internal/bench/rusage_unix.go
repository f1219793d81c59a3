//go:build unix

package bench

import (
	"runtime"
	"syscall"
	"time"
)

// selfUsage returns the CPU time (user + system) this process has used and
// its peak resident memory in bytes, from getrusage(RUSAGE_SELF). Child
// processes, such as the embedded server, are not included.
func selfUsage() (cpu time.Duration, peakRSS int64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	peakRSS = int64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		peakRSS *= 1024 // kB everywhere but macOS, which reports bytes
	}
	return cpu, peakRSS, true
}
