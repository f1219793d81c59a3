//go:build linux

package torture_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/internal/torture"
)

// needMount ends t unless the disk scenarios can mount their small file
// systems: that needs root and commands on PATH. Without them the test
// skips, or fails when every test is required (scripts/test, which CI runs
// as root); it is the one place that decides whether a disk scenario runs.
// Once they are there, a failure to mount fails the test.
func needMount(t *testing.T, commands ...string) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		testenv.Missing(t, "root (to mount small file systems)", fmt.Errorf("the tests run as user id %d; run them as root", uid))
	}
	for _, name := range commands {
		if _, err := exec.LookPath(name); err != nil {
			testenv.Missing(t, name, fmt.Errorf("%w; install it (mount: util-linux, mkfs.ext4: e2fsprogs)", err))
		}
	}
}

func TestDiskFull(t *testing.T) {
	needMount(t, "mount", "umount")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := torture.RunDiskFull(ctx, torture.DiskFullConfig{Bin: bin, Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}

func TestReadOnlyDisk(t *testing.T) {
	needMount(t, "mount", "umount", "mkfs.ext4")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := torture.RunReadOnly(ctx, torture.ReadOnlyConfig{Bin: bin, Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}
