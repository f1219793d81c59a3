//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

func TestGracefulRestartUnderLoad(t *testing.T) {
	cfg := torture.GracefulConfig{Bin: bin, Dir: t.TempDir(), Cycles: 5, Log: testLog{t}}
	if *long {
		cfg.Cycles = 50
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := torture.RunGraceful(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
	if !res.Pass {
		keepHistory(t, res.History)
	}
}
