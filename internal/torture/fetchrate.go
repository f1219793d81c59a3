//go:build linux

package torture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// FetchRate is one fetch-rate round of the deep-backlog scenario:
// Drained jobs fetched and acked from the top of a queue that held Backlog
// available jobs, by a fixed worker setup (BacklogConfig.Fetchers loops,
// each fetching up to BacklogConfig.FetchMax jobs without waiting and
// acking them with one batch call).
type FetchRate struct {
	// Backlog is how many jobs the queue held when the round began.
	Backlog int `json:"backlog"`
	// Drained is how many jobs were fetched and acked.
	Drained int `json:"drained"`
	// Seconds is how long fetching and acking them took.
	Seconds float64 `json:"seconds"`
	// PerSecond is Drained over Seconds: jobs fetched and acked per second.
	PerSecond float64 `json:"per_second"`
	// FirstFetchMS is the time from the start of the round to the first
	// fetch that answered: in the first round on a server just restarted,
	// the cost of a cold start.
	FirstFetchMS int64 `json:"first_fetch_ms"`
}

// FetchSeries is the fetch rate of one server of the deep-backlog
// scenario over its rounds, from the server's restart on.
type FetchSeries struct {
	// Backlog is how many jobs the queue held before the first round.
	Backlog int `json:"backlog"`
	// Drained is how many jobs the rounds fetched and acked in all.
	Drained int `json:"drained"`
	// MedianPerSecond is the median of the rounds' rates, the cold first
	// round included: the figure the ratio compares.
	MedianPerSecond float64 `json:"median_per_second"`
	// ColdPerSecond and ColdFirstFetchMS are the first round's rate and
	// time to its first fetch: the cost of a cold start, right after the
	// restart.
	ColdPerSecond    float64 `json:"cold_per_second"`
	ColdFirstFetchMS int64   `json:"cold_first_fetch_ms"`
	// Rounds are the rounds in the order they ran.
	Rounds []FetchRate `json:"rounds"`
}

// add appends round r and updates the totals, the median and, for the
// first round, the cold figures.
func (s *FetchSeries) add(r FetchRate) {
	if len(s.Rounds) == 0 {
		s.ColdPerSecond, s.ColdFirstFetchMS = r.PerSecond, r.FirstFetchMS
	}
	s.Rounds = append(s.Rounds, r)
	s.Drained += r.Drained
	rates := make([]float64, len(s.Rounds))
	for i, r := range s.Rounds {
		rates[i] = r.PerSecond
	}
	s.MedianPerSecond = math.Round(median(rates)*10) / 10
}

// median is the median of xs (the mean of the middle two when their
// number is even), 0 for none. It sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	mid := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[mid]
	}
	return (xs[mid-1] + xs[mid]) / 2
}

// measureFetch fetches and acks drain jobs from queue, which holds backlog
// available jobs, with cfg.Fetchers workers at once. Each worker asks for
// up to cfg.FetchMax jobs (never more than are left to drain), without a
// wait, and acks what it got with one AckBatch call before it fetches
// again; a fetch that hands out fewer than asked, or an ack that fails, is
// an error, since the backlog holds more jobs than the round drains. It
// uses a client of its own, so that no connection from before a restart or
// from another round is reused.
func measureFetch(ctx context.Context, cfg BacklogConfig, url, queue string, backlog, drain int) (FetchRate, error) {
	c := client.New(url)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		drained, firstNS atomic.Int64
		mu               sync.Mutex
		firstErr         error
		wg               sync.WaitGroup
	)
	fail := func(err error) error {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
		return err
	}
	budget := loadgen.NewBudget(int64(drain))
	began := time.Now()
	for range cfg.Fetchers {
		w := loadgen.Worker[*client.Job]{
			Concurrency: cfg.FetchMax,
			Budget:      budget,
			Fetch: func(ctx context.Context, n int) ([]*client.Job, error) {
				jobs, err := fetchExactly(ctx, c, queue, n, func() {
					firstNS.CompareAndSwap(0, int64(time.Since(began)))
				})
				if err != nil {
					return nil, fail(err)
				}
				return jobs, nil
			},
			Ack: func(ctx context.Context, jobs []*client.Job) error {
				if err := ackCompleted(ctx, c, jobs); err != nil {
					return fail(err)
				}
				drained.Add(int64(len(jobs)))
				return nil
			},
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	wg.Wait()
	took := time.Since(began)
	r := FetchRate{
		Backlog:      backlog,
		Drained:      int(drained.Load()),
		Seconds:      seconds(took),
		FirstFetchMS: time.Duration(firstNS.Load()).Milliseconds(),
	}
	if took > 0 {
		r.PerSecond = math.Round(float64(r.Drained)/took.Seconds()*10) / 10
	}
	if firstErr != nil {
		return r, firstErr
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, nil
}

// errShortFetch is returned by fetchExactly when a fetch hands out fewer
// jobs than asked although the backlog holds more.
var errShortFetch = errors.New("fetch handed out fewer jobs than asked")

// fetchExactly fetches n jobs of queue without a wait, calling fetched
// when the fetch has answered with jobs; fewer than n is an error.
func fetchExactly(ctx context.Context, c *client.Client, queue string, n int, fetched func()) ([]*client.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	jobs, err := c.Fetch(ctx, client.FetchParams{Queues: []string{queue}, Max: n})
	if err != nil {
		return nil, err
	}
	if len(jobs) > 0 {
		fetched()
	}
	if len(jobs) != n {
		return nil, fmt.Errorf("%w: %d of %d", errShortFetch, len(jobs), n)
	}
	return jobs, nil
}

// ackCompleted acks jobs in one batch call; an ack refused, or one that
// leaves its job other than completed, is an error.
func ackCompleted(ctx context.Context, c *client.Client, jobs []*client.Job) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	items := make([]client.AckItem, len(jobs))
	for i, j := range jobs {
		items[i] = client.AckItem{ID: j.ID, Token: j.Token()}
	}
	out, err := c.AckBatch(ctx, items)
	if err != nil {
		return err
	}
	for _, r := range out {
		if r.Err != nil {
			return fmt.Errorf("ack %s: %w", r.ID, r.Err)
		}
		if r.State != client.StateCompleted {
			return fmt.Errorf("ack %s: job ended %s, want completed", r.ID, r.State)
		}
	}
	return nil
}
