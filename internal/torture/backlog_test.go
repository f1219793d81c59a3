//go:build linux

package torture

import (
	"slices"
	"strings"
	"testing"
)

func TestBacklogConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := BacklogConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Jobs != 1_000_000 || cfg.ReferenceJobs != 100_000 || cfg.DrainJobs != 50_000 || cfg.FetchRounds != 5 ||
		cfg.Fetchers != 4 || cfg.FetchMax != 100 || cfg.MinFetchRatio != 0.70 {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, bad := range []BacklogConfig{
		{Jobs: 20_000, DrainJobs: 30_000},
		{Jobs: 30_000, DrainJobs: 30_000},
		{ReferenceJobs: 5_000, DrainJobs: 10_000},
		{ReferenceJobs: 10_000, DrainJobs: 10_000},
		{DrainJobs: 3, FetchRounds: 4},
		{FetchMax: 1001},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestRoundDrainSplitsTheDrainEvenly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		drain, rounds int
		want          []int
	}{
		{drain: 50_000, rounds: 5, want: []int{10_000, 10_000, 10_000, 10_000, 10_000}},
		{drain: 10_002, rounds: 4, want: []int{2501, 2501, 2500, 2500}},
		{drain: 3, rounds: 3, want: []int{1, 1, 1}},
	} {
		var got []int
		sum := 0
		for r := range tc.rounds {
			n := roundDrain(tc.drain, tc.rounds, r)
			got = append(got, n)
			sum += n
		}
		if !slices.Equal(got, tc.want) || sum != tc.drain {
			t.Errorf("drain %d in %d rounds: %v, want %v", tc.drain, tc.rounds, got, tc.want)
		}
	}
}

func TestFetchSeriesKeepsColdRoundAndMedian(t *testing.T) {
	t.Parallel()
	var s FetchSeries
	for i, rate := range []float64{5_000, 40_000, 9_000, 41_000, 39_000} {
		s.add(FetchRate{Drained: 100, PerSecond: rate, FirstFetchMS: int64(20 - i)})
	}
	if s.Drained != 500 || len(s.Rounds) != 5 || s.ColdPerSecond != 5_000 || s.ColdFirstFetchMS != 20 {
		t.Fatalf("series %+v", s)
	}
	// The median ignores one slow cold round and one slow warm one.
	if s.MedianPerSecond != 39_000 {
		t.Fatalf("median %v, want 39000", s.MedianPerSecond)
	}
	if s.Rounds[0].PerSecond != 5_000 || s.Rounds[4].PerSecond != 39_000 {
		t.Fatalf("rounds reordered: %+v", s.Rounds)
	}
	s.add(FetchRate{Drained: 100, PerSecond: 42_000})
	if s.MedianPerSecond != 39_500 {
		t.Fatalf("median of six %v, want 39500", s.MedianPerSecond)
	}
}

func TestCheckFetchRatio(t *testing.T) {
	t.Parallel()
	cfg, err := BacklogConfig{DrainJobs: 300, FetchRounds: 3}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	series := func(rates ...float64) FetchSeries {
		var s FetchSeries
		for _, r := range rates {
			s.add(FetchRate{Drained: 100, PerSecond: r})
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		ref, full FetchSeries
		ratio     float64
		fail      bool
	}{
		{name: "above", ref: series(10_000, 10_000, 10_000), full: series(8_000, 8_000, 8_000), ratio: 0.8},
		{name: "at the mark", ref: series(10_000, 10_000, 10_000), full: series(7_000, 7_000, 7_000), ratio: 0.7},
		{name: "just below", ref: series(10_000, 10_000, 10_000), full: series(6_999, 6_999, 6_999), ratio: 0.7, fail: true},
		{name: "far below", ref: series(10_000, 10_000, 10_000), full: series(2_000, 2_000, 2_000), ratio: 0.2, fail: true},
		// One slow round on either side does not move the medians.
		{name: "outliers", ref: series(3_000, 10_000, 10_000), full: series(9_000, 9_000, 30_000), ratio: 0.9},
		{name: "slow cold rounds", ref: series(5_000, 10_000, 10_000), full: series(1_000, 8_000, 8_000), ratio: 0.8},
		{name: "a failed round", ref: series(10_000, 10_000, 10_000), full: series(2_000, 2_000)},
	} {
		res := &BacklogResult{ReferenceFetch: tc.ref, Fetch: tc.full}
		checkFetchRatio(res, cfg)
		if res.FetchRatio != tc.ratio || (len(res.Violations) > 0) != tc.fail {
			t.Errorf("%s: ratio %v, violations %q", tc.name, res.FetchRatio, res.Violations)
		}
		if tc.fail && !strings.Contains(res.Violations[0], "below 0.70") {
			t.Errorf("%s: violation %q does not name the pass mark", tc.name, res.Violations[0])
		}
	}
}
