//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

// The disk scenarios mount small file systems, which needs root; CI runs
// as root, so a failure to mount fails the test rather than skipping it.

func TestDiskFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := torture.RunDiskFull(ctx, torture.DiskFullConfig{Bin: bin, Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}

func TestReadOnlyDisk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := torture.RunReadOnly(ctx, torture.ReadOnlyConfig{Bin: bin, Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}
