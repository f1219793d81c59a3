package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// Bounds of the load generators.
const (
	// callTimeout bounds one call to the server; a call cut short by it
	// has an unknown outcome.
	callTimeout = 10 * time.Second
	// settleLimit bounds how long a caller keeps retrying one call whose
	// answer was retryable before it gives up and records the give-up.
	settleLimit = 60 * time.Second
	// minRetry and maxRetry bound the pause before a retry.
	minRetry = 10 * time.Millisecond
	maxRetry = 250 * time.Millisecond
)

// LoadConfig shapes the mixed load of producers and consumers. Zero values
// take the defaults.
type LoadConfig struct {
	// Queue the jobs go to. Defaults to "torture".
	Queue string
	// Prefix starts every job id, so that ids of runs never collide.
	// Defaults to "j".
	Prefix string
	// Producers and Consumers are how many of each run at once. Default 4
	// each.
	Producers, Consumers int
	// Pace is each producer's pause between calls. Defaults to 10ms.
	Pace time.Duration
	// Lease is each job's lease. Defaults to 5s.
	Lease time.Duration
	// MaxAttempts of each job. Defaults to 1000, so that retries never
	// make a job dead.
	MaxAttempts int
	// BatchShare is the share of enqueue calls that are batches of 2 to
	// 20 jobs; DelayedShare the share of jobs delayed by up to 500 ms.
	// Defaults 0.3 and 0.2.
	BatchShare, DelayedShare float64
	// FailShare is the share of jobs failed with a retry; ExtendShare the
	// share extended before their ack. Defaults 0.15 and 0.05.
	FailShare, ExtendShare float64
	// SlowConsumer adds a consumer that leases one job at a time for
	// SlowLease, lets the lease run out (an abandoned lease) and then
	// acks with the stale token, which must be refused.
	SlowConsumer bool
	// SlowLease is the slow consumer's lease. Defaults to 300ms.
	SlowLease time.Duration
	// Seed seeds the generators' choices.
	Seed uint64
}

func (c *LoadConfig) normalize() {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Queue == "" {
		c.Queue = "torture"
	}
	if c.Prefix == "" {
		c.Prefix = "j"
	}
	if c.Producers <= 0 {
		c.Producers = 4
	}
	if c.Consumers <= 0 {
		c.Consumers = 4
	}
	if c.Pace <= 0 {
		c.Pace = 10 * time.Millisecond
	}
	if c.Lease <= 0 {
		c.Lease = 5 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 1000
	}
	if c.SlowLease <= 0 {
		c.SlowLease = 300 * time.Millisecond
	}
	def(&c.BatchShare, 0.3)
	def(&c.DelayedShare, 0.2)
	def(&c.FailShare, 0.15)
	def(&c.ExtendShare, 0.05)
}

// Load runs producers and consumers against one server and records every
// call in a History. Producers retry a call with an unknown or retryable
// outcome with the same job ids (idempotent enqueue), as a real client
// does; consumers retry acks and fails the same way.
type Load struct {
	cfg LoadConfig
	c   *client.Client
	h   *History

	ctx                      context.Context // ends every retry
	cancel                   context.CancelFunc
	stopProduce, stopConsume chan struct{}
	producers, consumers     sync.WaitGroup

	mu       sync.Mutex
	gaveUp   map[string]int // calls given up on, by "op:code"
	finalErr map[string]int // calls whose last answer was a refusal, by "op:code"
}

// StartLoad starts the producers and consumers of cfg against c, recording
// into h.
func StartLoad(c *client.Client, h *History, cfg LoadConfig) *Load {
	cfg.normalize()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{
		cfg: cfg, c: c, h: h, ctx: ctx, cancel: cancel,
		stopProduce: make(chan struct{}), stopConsume: make(chan struct{}),
		gaveUp: map[string]int{}, finalErr: map[string]int{},
	}
	producers := loadgen.Producer{Clients: cfg.Producers, Pace: cfg.Pace, Stop: l.stopProduce}
	l.producers.Add(1)
	go func() {
		defer l.producers.Done()
		_ = producers.Run(l.ctx, l.producer)
	}()
	consumers := make([]loadgen.Worker[*client.Job], 0, cfg.Consumers+1)
	for i := range cfg.Consumers {
		consumers = append(consumers, l.consumer(i))
	}
	if cfg.SlowConsumer {
		consumers = append(consumers, l.slowConsumer())
	}
	for _, w := range consumers {
		l.consumers.Add(1)
		go func() {
			defer l.consumers.Done()
			w.Run(l.ctx)
		}()
	}
	return l
}

// StopProducers stops new enqueues and waits up to limit for the producers
// to settle the calls they have under way.
func (l *Load) StopProducers(limit time.Duration) error {
	close(l.stopProduce)
	return l.wait(&l.producers, limit, "producers")
}

// StopConsumers stops fetching and waits up to limit for the consumers to
// settle the jobs they hold.
func (l *Load) StopConsumers(limit time.Duration) error {
	close(l.stopConsume)
	return l.wait(&l.consumers, limit, "consumers")
}

// Abort ends every retry at once; used when a run fails.
func (l *Load) Abort() { l.cancel() }

func (l *Load) wait(wg *sync.WaitGroup, limit time.Duration, who string) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		l.cancel()
		<-done
		return fmt.Errorf("%s did not settle within %v", who, limit)
	}
}

// CallErrors returns the calls that ended without success after their
// retries: refused for good ("op:code") or given up on ("op:gave_up").
func (l *Load) CallErrors() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.finalErr {
		out[k] += v
	}
	for k, v := range l.gaveUp {
		out[k+":gave_up"] += v
	}
	return out
}

func (l *Load) noteFinal(op Op, o outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	code := o.code
	if code == "" {
		code = "transport"
	}
	l.finalErr[string(op)+":"+code]++
}

func (l *Load) noteGaveUp(op Op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gaveUp[string(op)]++
}

// retry runs call until its outcome is not retryable, l ends, or
// settleLimit passes. It reports the last outcome and whether it gave up.
func (l *Load) retry(call func() outcome) (outcome, bool) {
	deadline := time.Now().Add(settleLimit)
	pause := minRetry
	for {
		o := call()
		if !o.retryable() {
			return o, false
		}
		if l.ctx.Err() != nil || time.Now().After(deadline) {
			return o, true
		}
		loadgen.Sleep(l.ctx, pause/2+rand.N(pause/2+1))
		pause = min(pause*2, maxRetry)
	}
}

// sortedKeys returns m's keys in order, for stable reports.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
