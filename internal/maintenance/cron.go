package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// Cron fires cron schedules when their ticks come: it sleeps until the
// earliest next tick of a schedule that is not paused, then has fire
// enqueue the jobs of every due tick. The engine wakes it when a schedule
// is created, changed or resumed. On a store that several nodes share it
// runs on the leader only, and a firing records its tick in the same
// transaction as its jobs, so a tick fires once across crashes and
// leader changes.
type Cron struct {
	*loop
}

// NewCron returns the service. fire fires the schedules due at now and
// returns when the next one is due (now when it left some due, zero when
// none is known); idle bounds its sleep.
func NewCron(fire func(ctx context.Context, now time.Time) (time.Time, error), now func() time.Time, idle time.Duration, logger *slog.Logger) *Cron {
	return &Cron{newLoop("cron", idle, now, logger, fire)}
}
