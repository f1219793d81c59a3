package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// Rescuer takes back jobs whose lease ran out (their worker died or hung)
// and makes them available again, or dead when out of attempts. It sleeps
// until the earliest lease expiry; the engine wakes it for earlier ones.
type Rescuer struct {
	*loop
}

// NewRescuer returns a rescuer on st that calls notify with the queues in
// which jobs became available, and rescued, when not nil, with how many
// jobs of each queue it took back after each pass that took any (for
// metrics; it must not block). idle bounds its sleep.
func NewRescuer(st store.Maintainer, notify func(queues []string), rescued func(byQueue map[string]int), now func() time.Time,
	idle time.Duration, logger *slog.Logger) *Rescuer {
	pass := func(ctx context.Context, now time.Time) (time.Time, error) {
		res, err := st.JobRescueExpired(ctx, now, PassLimit)
		if err != nil {
			return time.Time{}, fmt.Errorf("rescue expired jobs: %w", err)
		}
		if res.Count > 0 {
			logger.Info("rescued jobs with expired leases", "count", res.Count)
			if rescued != nil {
				rescued(res.Rescued)
			}
		}
		notify(res.Available)
		if res.Count >= PassLimit {
			return now, nil
		}
		return res.Next, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Rescuer{newLoop("rescuer", idle, now, logger, pass)}
}
