package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// openFolderEnv names, in the environment of this test binary, a data
// folder for the binary to open a store on as a helper process (see
// TestMain) instead of running the tests.
const openFolderEnv = "SPOOL_TEST_OPEN_FOLDER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(openFolderEnv); dir != "" {
		os.Exit(openAndReport(dir))
	}
	os.Exit(m.Run())
}

// openAndReport opens a store on dir, writes a job to it and closes it,
// printing the outcome; it returns the helper process's exit code.
func openAndReport(dir string) int {
	ctx := context.Background()
	s, err := Open(ctx, Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		_, err = s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: params("child", 1), Now: t0})
		err = errors.Join(err, s.Close())
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("inserted")
	return 0
}

// openInAnotherProcess runs openAndReport on dir in a process of its own
// and returns what it printed and whether it succeeded.
func openInAnotherProcess(t *testing.T, dir string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), openFolderEnv+"="+dir)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run helper process: %v", err)
	}
	return strings.TrimSpace(string(out)), err == nil
}

// A data folder serves one process at a time: while a store has it open,
// a store of another process fails to open it, naming the reason, and
// writes nothing; once the first store is closed, the other opens it.
func TestAFolderServesOneProcessAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("parent", 1)...)
	out, ok := openInAnotherProcess(t, b.dir)
	if ok || !strings.Contains(out, "data folder "+b.dir+" is in use by another process") {
		t.Fatalf("another process opening a folder in use: ok=%v, printed %q; want a failure naming the folder in use", ok, out)
	}
	if q, err := b.s.QueueGet(b.ctx, "child"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("the refused process's queue: %+v, %v; want none", q, err)
	}
	b.reopen()
	if err := b.s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	out, ok = openInAnotherProcess(t, b.dir)
	if !ok || out != "inserted" {
		t.Fatalf("another process opening a folder no longer in use: ok=%v, printed %q", ok, out)
	}
	b.open()
	if got := b.counts("child")[job.StateAvailable]; got != 1 {
		t.Fatalf("after the other process's insert, queue child holds %d jobs, want 1", got)
	}
}
