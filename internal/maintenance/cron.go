package maintenance

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/schedule"
)

// Cron fires cron schedules when their ticks come: it sleeps until the
// earliest next tick of a schedule that is not paused, then has fire
// enqueue the jobs of every due tick. The engine wakes it when a schedule
// is created, changed or resumed. On a store that several nodes share it
// runs on the leader only, and a firing records its tick in the same
// transaction as its jobs, so a tick fires once across crashes and
// leader changes.
//
// No tick goes unseen: after each pass that skipped ticks (they enqueued
// no job of their own) or fired some late (more than schedule.LateAfter
// after their time), it logs a warning that counts them and names a few
// of their schedules.
type Cron struct {
	*loop
}

// CronFire fires the schedules due at now and returns when the next one
// is due (now when it left some due, zero when none is known) and a tally
// of the ticks it handled (see engine.Engine.FireSchedules).
type CronFire func(ctx context.Context, now time.Time) (time.Time, schedule.Tally, error)

// NewCron returns the service. observe, when not nil, is told the tally
// of every pass (for metrics; it must not block); idle bounds its sleep.
func NewCron(fire CronFire, observe func(schedule.Tally), now func() time.Time, idle time.Duration, logger *slog.Logger) *Cron {
	if logger == nil {
		logger = slog.Default()
	}
	pass := func(ctx context.Context, now time.Time) (time.Time, error) {
		next, tally, err := fire(ctx, now)
		if tally.Skipped > 0 {
			logger.Warn("schedule ticks skipped: they enqueued no job of their own", "ticks", tally.Skipped,
				"schedules", tally.SkippedSchedules, "names", names(tally.SkippedNames, tally.SkippedSchedules))
		}
		if tally.Late > 0 {
			logger.Warn("schedule ticks fired late", "ticks", tally.Late, "most_late", tally.MostLate.Round(time.Millisecond),
				"schedules", tally.LateSchedules, "names", names(tally.LateNames, tally.LateSchedules))
		}
		if observe != nil {
			observe(tally)
		}
		return next, err
	}
	return &Cron{newLoop("cron", idle, now, logger, pass)}
}

// names lists the first schedules of a tally, with an ellipsis when it
// counted more than it named.
func names(first []string, of int) string {
	list := strings.Join(first, ", ")
	if of > len(first) {
		list += ", …"
	}
	return list
}
