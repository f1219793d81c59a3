package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// PassLimit bounds the jobs one scheduler or rescuer pass moves; a full pass
// is followed at once by another.
const PassLimit = 1000

// Scheduler makes scheduled and retrying jobs available when their run time
// comes. It sleeps until the earliest known run time; the engine wakes it
// for jobs due earlier.
type Scheduler struct {
	*loop
}

// NewScheduler returns a scheduler on st that calls notify with the queues
// in which jobs became available. idle bounds its sleep.
func NewScheduler(st store.Maintainer, notify func(queues []string), now func() time.Time, idle time.Duration, logger *slog.Logger) *Scheduler {
	pass := func(ctx context.Context, now time.Time) (time.Time, error) {
		res, err := st.JobPromoteDue(ctx, now, PassLimit)
		if err != nil {
			return time.Time{}, fmt.Errorf("promote due jobs: %w", err)
		}
		notify(res.Available)
		if res.Count >= PassLimit {
			return now, nil
		}
		return res.Next, nil
	}
	return &Scheduler{newLoop("scheduler", idle, now, logger, pass)}
}
