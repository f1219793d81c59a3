//go:build linux

package torture_test

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/torture"
)

// TestBacklogMemory runs the deep-backlog scenario: memory and restart
// time with the backlog, and the fetch rate on it against the rate on a
// backlog of 100,000, in 5 alternating rounds on each server. The quick
// form drains 10,000 jobs from each server (2,000 a round), which checks
// the mechanism and the pass mark on the median rounds in a few seconds;
// the long form drains the default 50,000 from 10 M.
func TestBacklogMemory(t *testing.T) {
	cfg := torture.BacklogConfig{Bin: bin, Dir: t.TempDir(), Jobs: 1_000_000, DrainJobs: 10_000, Log: testLog{t}}
	limit := 5 * time.Minute
	if *long {
		cfg.Jobs, cfg.DrainJobs, limit = 10_000_000, 0, 30*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, err := torture.RunBacklog(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	report(t, res)
	for name, s := range map[string]torture.FetchSeries{"reference": res.ReferenceFetch, "full backlog": res.Fetch} {
		if len(s.Rounds) != res.FetchRounds || s.MedianPerSecond <= 0 || s.ColdPerSecond != s.Rounds[0].PerSecond {
			t.Errorf("%s fetch rate not measured in %d rounds: %+v", name, res.FetchRounds, s)
		}
	}
	if res.ReferenceFetch.Drained != res.Fetch.Drained || res.FetchRatio <= 0 {
		t.Errorf("fetch rates not comparable: reference %+v, full %+v, ratio %v", res.ReferenceFetch, res.Fetch, res.FetchRatio)
	}
}
