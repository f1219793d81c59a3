package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// A rate counts starts by the engine's clock (Config.Clock), at the
// moment each fetch's claim runs: with the clock held still, no wall time
// that passes opens the window, and the window opens exactly one period
// after the starts it holds, by that clock.
func TestRateCountsStartsByTheEngineClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := &clock{now: t0}
	e := New(st, Config{Clock: c})
	if _, err := e.SetLimits(ctx, "r", job.Limits{Rate: job.Rate{Limit: 2, Period: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := e.Enqueue(ctx, EnqueueRequest{Queue: "r", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(at time.Duration) int {
		t.Helper()
		c.set(t0.Add(at))
		jobs, err := e.Fetch(ctx, FetchRequest{Queues: []string{"r"}, Max: 6})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if !j.StartedAt.Equal(t0.Add(at)) {
				t.Fatalf("job started at %v, want the engine's clock, %v", j.StartedAt, t0.Add(at))
			}
		}
		return len(jobs)
	}
	for _, step := range []struct {
		at   time.Duration
		want int
	}{
		{0, 2},
		{0, 0},
		{time.Minute - time.Millisecond, 0},
		{time.Minute, 2},
		{time.Minute + 30*time.Second, 0},
		{2 * time.Minute, 2},
	} {
		if got := fetch(step.at); got != step.want {
			t.Fatalf("fetch at t0+%v: %d jobs, want %d", step.at, got, step.want)
		}
	}
}
