package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: the kernel
// exports them in USER_HZ, which is 100 on every Linux architecture Go
// supports.
const userHZ = 100

// errNoProc is returned where /proc is not available (not Linux).
var errNoProc = errors.New("process statistics need /proc (Linux)")

// Usage is one reading of a process's resource use from /proc: what a
// harness reports of the server it runs, apart from its own.
type Usage struct {
	// CPU is the user plus system time the process has used so far.
	CPU time.Duration
	// RSS is its resident memory now, HWM its peak resident memory since
	// it started (VmHWM), both in bytes.
	RSS, HWM int64
}

// ReadUsage reads the CPU time and memory of process pid from
// /proc/<pid>/stat (utime + stime) and /proc/<pid>/status (VmRSS, VmHWM).
// Where there is no /proc (not Linux) it returns an error saying so.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return u, errNoProc
		}
		return u, fmt.Errorf("read process %d stats: %w", pid, err)
	}
	if u.CPU, err = parseStatCPU(stat); err != nil {
		return u, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read process %d status: %w", pid, err)
	}
	u.RSS = statusKB(status, "VmRSS:") * 1024
	u.HWM = statusKB(status, "VmHWM:") * 1024
	return u, nil
}

// parseStatCPU returns utime + stime of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("no command name")
	}
	// Fields after the name start with field 3 (state); utime and stime
	// are fields 14 and 15.
	f := bytes.Fields(stat[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// statusKB returns the value in kB of a "Name:   1234 kB" line of
// /proc/<pid>/status, or 0 when the line is missing.
func statusKB(status []byte, name string) int64 {
	i := bytes.Index(status, []byte(name))
	if i < 0 {
		return 0
	}
	rest := status[i+len(name):]
	if nl := bytes.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[:nl]
	}
	f := bytes.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return n
}
