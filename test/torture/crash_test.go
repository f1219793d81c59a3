//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

func TestCrashLoop(t *testing.T) {
	cases := []struct {
		sync          string
		quick, cycles int
	}{
		{"full", 50, 500},
		{"normal", 20, 200},
	}
	for _, c := range cases {
		t.Run("sync="+c.sync, func(t *testing.T) {
			cfg := torture.CrashConfig{Bin: bin, Dir: t.TempDir(), Sync: c.sync, Cycles: c.quick, Log: testLog{t}}
			if *long {
				cfg.Cycles = c.cycles
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			res, err := torture.RunCrash(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			report(t, res)
			if !res.Pass {
				keepHistory(t, res.History)
			}
		})
	}
}
