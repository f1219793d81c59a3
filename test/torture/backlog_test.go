//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

func TestBacklogMemory(t *testing.T) {
	cfg := torture.BacklogConfig{Bin: bin, Dir: t.TempDir(), Jobs: 1_000_000, Log: testLog{t}}
	limit := 5 * time.Minute
	if *long {
		cfg.Jobs, limit = 10_000_000, 30*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := torture.RunBacklog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}
