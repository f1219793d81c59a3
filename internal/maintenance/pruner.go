package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// Retention says how long and how many finished jobs are kept.
type Retention struct {
	// Completed is how long completed and cancelled jobs are kept; zero
	// keeps them regardless of age.
	Completed time.Duration
	// Dead is how long dead jobs are kept; zero keeps them regardless of age.
	Dead time.Duration
	// MaxCompleted caps how many completed and cancelled jobs are kept; zero
	// means no cap.
	MaxCompleted int
	// MaxDead caps how many dead jobs are kept; zero means no cap.
	MaxDead int
	// Interval is the time between prune passes.
	Interval time.Duration
}

// pruneBatch bounds the jobs one prune statement deletes, so that pruning
// never holds the writer for long.
const pruneBatch = 5000

// Pruner deletes finished jobs by retention, in bounded batches.
type Pruner struct {
	*loop
}

// NewPruner returns a pruner on st applying r.
func NewPruner(st store.Maintainer, r Retention, now func() time.Time, logger *slog.Logger) *Pruner {
	if logger == nil {
		logger = slog.Default()
	}
	interval := r.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	pass := func(ctx context.Context, now time.Time) (time.Time, error) {
		p := &store.JobPruneParams{KeepCompleted: r.MaxCompleted, KeepDead: r.MaxDead, Limit: pruneBatch, Now: now}
		if r.Completed > 0 {
			p.CompletedBefore = now.Add(-r.Completed)
		}
		if r.Dead > 0 {
			p.DeadBefore = now.Add(-r.Dead)
		}
		n, err := st.JobPrune(ctx, p)
		if err != nil {
			return time.Time{}, fmt.Errorf("prune jobs: %w", err)
		}
		if n > 0 {
			logger.Debug("pruned finished jobs", "count", n)
		}
		if n >= pruneBatch {
			return now, nil
		}
		return now.Add(interval), nil
	}
	return &Pruner{newLoop("pruner", interval, now, logger, pass)}
}
