//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

func TestWorkerKilledAndStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := torture.RunWorkerFault(ctx, torture.WorkerFaultConfig{Bin: bin, WorkerBin: harness, Dir: t.TempDir(), Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}

func TestPoisonJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := torture.PoisonConfig{Bin: bin, WorkerBin: harness, Dir: t.TempDir(), Log: testLog{t}}
	if *long {
		cfg.MaxAttempts = 10
	}
	res, err := torture.RunPoison(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
}
