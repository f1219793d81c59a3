package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the observers of a run.
const (
	// MinScrapeEvery bounds how often a run scrapes /metrics.
	MinScrapeEvery = 100 * time.Millisecond
	// observerRetry is how long an observer waits after a failed request.
	observerRetry = 100 * time.Millisecond
	// DashboardRefresh is how often an open dashboard overview reloads
	// its live parts (internal/dashboard, overview.html).
	DashboardRefresh = 2 * time.Second
)

// Observers is what the run's observers of the server saw: the scrapes of
// GET /metrics (Options.ScrapeMetrics) and the reader of GET /v1/events
// (Options.WatchEvents), which run beside the load so that their cost to
// the queue shows in the run's figures.
type Observers struct {
	// ScrapeEvery is the interval of the scrapes; empty when none ran.
	ScrapeEvery string `json:"scrape_every,omitempty"`
	// Scrapes counts the scrapes answered 200, ScrapeLatency their
	// latency, ScrapeBytes the size of the last one.
	Scrapes       int64         `json:"scrapes,omitempty"`
	ScrapeLatency *LatencyStats `json:"scrape_latency,omitempty"`
	ScrapeBytes   int64         `json:"scrape_bytes,omitempty"`
	// Watched is true when a reader followed every event.
	Watched bool `json:"watched_events,omitempty"`
	// Events counts the events it read; Drops how often the server
	// dropped it for falling behind (it then resumed after the last event
	// it read).
	Events int64 `json:"events,omitempty"`
	Drops  int64 `json:"event_drops,omitempty"`
	// DashboardLoads counts the refreshes of the dashboard's overview
	// answered 200 (Options.WatchDashboard).
	DashboardLoads int64 `json:"dashboard_loads,omitempty"`
	// Failures counts observer requests that failed (they do not count
	// as errors of the run).
	Failures int64 `json:"failures,omitempty"`
}

// observers runs the scraper and the event reader of a run.
type observers struct {
	r      *runner
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	scrapes, bytes, events, drops, failures, loads atomic.Int64
	latency                                        *Histogram
}

// startObservers starts the observers the options ask for; stop ends
// them and records what they saw.
func (r *runner) startObservers(ctx context.Context) *observers {
	o := &observers{r: r, latency: NewHistogram(), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}}
	ctx, o.cancel = context.WithCancel(ctx)
	if r.o.ScrapeMetrics > 0 {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.scrapeLoop(ctx)
		}()
	}
	if r.o.WatchEvents {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.watchLoop(ctx)
		}()
	}
	if r.o.WatchDashboard {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			o.dashboardLoop(ctx)
		}()
	}
	return o
}

// stop ends the observers and puts what they saw in the result.
func (o *observers) stop() {
	o.cancel()
	o.wg.Wait()
	o.client.CloseIdleConnections()
	if o.r.o.ScrapeMetrics <= 0 && !o.r.o.WatchEvents && !o.r.o.WatchDashboard {
		return
	}
	res := &Observers{Watched: o.r.o.WatchEvents, Scrapes: o.scrapes.Load(), ScrapeBytes: o.bytes.Load(),
		Events: o.events.Load(), Drops: o.drops.Load(), DashboardLoads: o.loads.Load(), Failures: o.failures.Load()}
	if o.r.o.ScrapeMetrics > 0 {
		res.ScrapeEvery = o.r.o.ScrapeMetrics.String()
		if o.latency.Count() > 0 {
			res.ScrapeLatency = o.latency.Stats()
		}
	}
	o.r.res.Observers = res
}

// request builds a GET of path on the server with the run's token.
func (o *observers) request(ctx context.Context, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", o.r.base+path, nil)
	if err != nil {
		return nil, err
	}
	if o.r.auth != "" {
		req.Header.Set("Authorization", o.r.auth)
	}
	return req, nil
}

// scrapeLoop reads GET /metrics every ScrapeMetrics until ctx ends.
func (o *observers) scrapeLoop(ctx context.Context) {
	tick := time.NewTicker(o.r.o.ScrapeMetrics)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		n, err := o.scrape(ctx)
		if err != nil {
			if ctx.Err() == nil {
				o.failures.Add(1)
			}
			continue
		}
		o.latency.Record(time.Since(start))
		o.scrapes.Add(1)
		o.bytes.Store(n)
	}
}

// dashboardLoop loads, every DashboardRefresh until ctx ends, what an
// open overview page of the dashboard reloads: its live fragment and its
// chart's data. (With auth on the dashboard wants its login cookie: the
// run's token is sent as that cookie.)
func (o *observers) dashboardLoop(ctx context.Context) {
	tick := time.NewTicker(DashboardRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ok := true
		for _, path := range []string{"/?part=live", "/ui/throughput.json?span=300"} {
			if err := o.load(ctx, path); err != nil {
				ok = false
				if ctx.Err() == nil {
					o.failures.Add(1)
				}
			}
		}
		if ok {
			o.loads.Add(1)
		}
	}
}

// load GETs one of the dashboard's paths as its page does.
func (o *observers) load(ctx context.Context, path string) error {
	req, err := o.request(ctx, path)
	if err != nil {
		return err
	}
	req.Header.Set("HX-Request", "true")
	if token, ok := strings.CutPrefix(o.r.auth, "Bearer "); ok {
		req.AddCookie(&http.Cookie{Name: "spool_token", Value: token})
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// scrape reads /metrics once and returns its size.
func (o *observers) scrape(ctx context.Context) (int64, error) {
	req, err := o.request(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return n, err
}

// watchLoop follows GET /v1/events with no filter until ctx ends,
// resuming after the last event it read when the stream ends.
func (o *observers) watchLoop(ctx context.Context) {
	last := ""
	for ctx.Err() == nil {
		var err error
		last, err = o.watch(ctx, last)
		if err != nil && ctx.Err() == nil {
			o.failures.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(observerRetry):
			}
		}
	}
}

// watch reads one event stream, resuming after event id last ("" for
// live events only), until it ends; it returns the id of the last event
// read.
func (o *observers) watch(ctx context.Context, last string) (string, error) {
	req, err := o.request(ctx, "/v1/events")
	if err != nil {
		return last, err
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return last, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return last, fmt.Errorf("GET /v1/events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			last = string(line[len("id: "):])
		case bytes.HasPrefix(line, []byte("event: job.")):
			o.events.Add(1)
		case bytes.Equal(line, []byte("event: stream.dropped")):
			o.drops.Add(1)
		}
	}
	if err := sc.Err(); err != nil && !strings.Contains(err.Error(), "canceled") {
		return last, err
	}
	return last, nil
}
