//go:build linux

// Package torture_test runs Spool's torture and fault scenarios against
// real server and worker processes (the spool and spool-torture binaries):
// kill -9 in a loop, killed and stopped workers, a poison job, a full and
// a read-only disk, a deep backlog and graceful restarts under load. The
// quick forms run by default; -torture.long (or SPOOL_TORTURE_LONG=1) runs
// the long forms documented in docs/reliability.md.
package torture_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/torture"
)

var long = flag.Bool("torture.long", os.Getenv("SPOOL_TORTURE_LONG") == "1", "run the long forms of the torture scenarios")

// bin is the spool binary the tests run as the server, and harness the
// spool-torture binary they run as the worker processes; both are built
// once, without the race detector.
var bin, harness string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spool-torture-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "make a folder for the spool binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, harness = filepath.Join(dir, "spool"), filepath.Join(dir, "spool-torture")
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/spoolq/spool/cmd/spool", "github.com/spoolq/spool/cmd/spool-torture")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the spool and spool-torture binaries:", err)
		return 1
	}
	return m.Run()
}

// testLog writes progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// report logs r as JSON and fails the test for each missed pass mark.
func report(t *testing.T, r torture.Result) {
	t.Helper()
	if err := torture.PrintJSON(testLog{t}, r); err != nil {
		t.Fatal(err)
	}
	for _, v := range r.Failures() {
		t.Error(v)
	}
}

// keepHistory copies a failed run's history out of the test's temporary
// folder, so that it can be replayed through torture.Check.
func keepHistory(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("history not kept: %v", err)
		return
	}
	f, err := os.CreateTemp("", "spool-torture-history-*.jsonl")
	if err != nil {
		t.Logf("history not kept: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Logf("history not kept: %v", err)
		return
	}
	t.Logf("history of the failed run: %s", f.Name())
}
