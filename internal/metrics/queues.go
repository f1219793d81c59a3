package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spoolq/spool/internal/job"
)

var (
	jobsDesc = prometheus.NewDesc("spool_jobs", "Jobs by queue and state, as the store counts them (read at most once per cache period).",
		[]string{"queue", "state"}, nil)
	oldestDesc = prometheus.NewDesc("spool_queue_oldest_available_age_seconds",
		"Age of the oldest available job of each queue: the time since the earliest run time among its jobs not handed out; 0 when none is available.",
		[]string{"queue"}, nil)
)

// queueCollector reads the queue listing at scrape time, at most once per
// cache period: scrapes in between answer from the last listing, whose
// ages still grow with the clock.
type queueCollector struct {
	cfg *Config

	mu     sync.Mutex // held while listing, so that concurrent scrapes list once
	at     time.Time  // when qs was read, by the wall clock
	qs     []job.QueueInfo
	listed bool
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- oldestDesc
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	qs, err := c.queues()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	now := c.cfg.Now()
	for i := range qs {
		q := &qs[i]
		for _, st := range job.States {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(q.Counts[st]), q.Name, string(st))
		}
		age := 0.0
		if !q.OldestAvailable.IsZero() {
			age = max(now.Sub(q.OldestAvailable).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, q.Name)
	}
}

// queues returns the cached listing, or a new one when it is older than
// the cache period.
func (c *queueCollector) queues() ([]job.QueueInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed && time.Since(c.at) < c.cfg.CacheFor {
		return c.qs, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	qs, err := c.cfg.Queues(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queues for metrics: %w", err)
	}
	c.qs, c.at, c.listed = qs, time.Now(), true
	return qs, nil
}
