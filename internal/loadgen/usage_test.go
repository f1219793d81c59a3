package loadgen

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a ')' of its own; utime 250, stime 50.
	line := []byte("4242 (spool (x) srv) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 12 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("cpu %v, want %v", got, want)
	}
	if _, err := parseStatCPU([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("short line parsed")
	}
}

func TestStatusKB(t *testing.T) {
	t.Parallel()
	status := []byte("Name:\tspool\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n")
	if got := statusKB(status, "VmHWM:"); got != 51200 {
		t.Fatalf("VmHWM %d", got)
	}
	if got := statusKB(status, "VmRSS:"); got != 40960 {
		t.Fatalf("VmRSS %d", got)
	}
	if got := statusKB(status, "VmSwap:"); got != 0 {
		t.Fatalf("missing line gave %d", got)
	}
}

func TestReadUsageSelf(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS {
		t.Fatalf("rss %d hwm %d", u.RSS, u.HWM)
	}
}
