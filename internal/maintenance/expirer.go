package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// Expirer kills the jobs that waited past their queue's maximum wait
// without a claim meeting them (a queue nobody fetches from, a paused
// queue, jobs behind others or held back by limits), each into its
// queue's dead-letter queue if it has one. Claims kill the ones they
// meet themselves. It sleeps until the next deadline the store knows of,
// at most its idle interval, so a job past its wait dies within about
// that interval of its deadline.
type Expirer struct {
	*loop
}

// NewExpirer returns an expirer on st that calls notify with the
// dead-letter queues that got copies. idle bounds its sleep.
func NewExpirer(st store.Maintainer, notify func(queues []string), now func() time.Time, idle time.Duration, logger *slog.Logger) *Expirer {
	if logger == nil {
		logger = slog.Default()
	}
	pass := func(ctx context.Context, now time.Time) (time.Time, error) {
		res, err := st.JobExpireWaiting(ctx, now, PassLimit)
		if err != nil {
			return time.Time{}, fmt.Errorf("expire waiting jobs: %w", err)
		}
		if res.Count > 0 {
			logger.Info("killed jobs past their queue's maximum wait", "count", res.Count)
		}
		notify(res.Available)
		if res.Count >= PassLimit {
			return now, nil
		}
		return res.Next, nil
	}
	return &Expirer{newLoop("expirer", idle, now, logger, pass)}
}
