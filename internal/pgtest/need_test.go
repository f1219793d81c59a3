package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// ending records how Need ended a test, in place of the testing
// package's Skip and Fatal, which would end this test itself.
type ending struct {
	testing.TB
	skipped, failed bool
}

func (e *ending) Helper()               {}
func (e *ending) Skipf(string, ...any)  { e.skipped = true }
func (e *ending) Fatalf(string, ...any) { e.failed = true }

// With no PostgreSQL where BinEnv points, a test that needs it skips;
// with SPOOL_TEST_REQUIRE_ALL=1 it fails instead. Where BinEnv holds the
// server's binaries, it runs.
func TestNeedSkipsOrFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinEnv, dir)
	for _, require := range []string{"", "1"} {
		t.Setenv(testenv.RequireAllVar, require)
		e := &ending{}
		Need(e)
		if e.failed != (require == "1") || e.skipped == e.failed {
			t.Errorf("no PostgreSQL, %s=%q: skipped %v, failed %v", testenv.RequireAllVar, require, e.skipped, e.failed)
		}
	}
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &ending{}
	Need(e)
	if e.skipped || e.failed {
		t.Errorf("PostgreSQL in %s=%s: skipped %v, failed %v", BinEnv, dir, e.skipped, e.failed)
	}
}

// FindBin looks only in BinEnv when it is set, and names it when the
// binaries are not there.
func TestFindBinHonoursBinEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinEnv, dir)
	if got, err := FindBin(); err == nil || !strings.Contains(err.Error(), BinEnv) {
		t.Fatalf("FindBin with %s=%s (empty): %q, %v; want an error naming %s", BinEnv, dir, got, err, BinEnv)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindBin(); err != nil || got != dir {
		t.Fatalf("FindBin with %s=%s holding initdb and postgres: %q, %v", BinEnv, dir, got, err)
	}
}
