package dashboard

import (
	"log/slog"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/events"
)

// Bounds of the throughput sampler.
const (
	// sampleWindow is how many seconds of throughput the sampler keeps.
	sampleWindow = 600
	// maxSampledQueues bounds the queues the sampler counts apart (about
	// 10 KiB each); the events of further queues count in the node's
	// totals only, until a queue quiet for a whole window makes room.
	maxSampledQueues = 512
	// sampleBuffer is the sampler's subscription buffer: large, so that a
	// burst of acks does not drop it (it resubscribes if it is dropped).
	sampleBuffer = 16_384
	// rateSpan is the span the jobs/s figures average over.
	rateSpan = 60
)

// slot counts one second's outcomes.
type slot struct {
	sec       int64 // the unix second counted; a slot of another second is stale
	completed uint32
	failed    uint32
}

// series is one queue's (or the node's) outcomes over the last
// sampleWindow seconds, in a ring indexed by the unix second.
type series struct {
	slots [sampleWindow]slot
	last  int64 // the latest second counted
}

func (s *series) add(sec int64, failed bool) {
	sl := &s.slots[uint64(sec)%sampleWindow]
	if sl.sec != sec {
		*sl = slot{sec: sec}
	}
	if failed {
		sl.failed++
	} else {
		sl.completed++
	}
	if sec > s.last {
		s.last = sec
	}
}

// at returns the counts of second sec.
func (s *series) at(sec int64) (completed, failed uint32) {
	sl := &s.slots[uint64(sec)%sampleWindow]
	if sl.sec != sec {
		return 0, 0
	}
	return sl.completed, sl.failed
}

// sampler counts completed and failed jobs per second, per queue and for
// the node, from the engine's event bus: the rates and the throughput
// chart of the dashboard. Its memory is bounded (maxSampledQueues series).
// A failed attempt (job.failed) and a death (job.dead) both count as
// failed. The counts are this node's: on PostgreSQL each node counts the
// jobs its own API finished.
type sampler struct {
	bus    *events.Bus
	logger *slog.Logger

	mu     sync.Mutex
	total  series
	queues map[string]*series

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newSampler(bus *events.Bus, logger *slog.Logger) *sampler {
	return &sampler{bus: bus, logger: logger, queues: map[string]*series{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// outcomes lets through the events the sampler counts, so that the others
// (an enqueue, a start) do not wake it.
var outcomes = events.Filter{Types: []events.Type{events.Completed, events.Failed, events.Dead}}

// start subscribes to the bus and counts until stop is called or the bus
// closes.
func (s *sampler) start() {
	sub, _, _ := s.bus.Subscribe(outcomes, false, 0, sampleBuffer)
	go s.run(sub)
}

func (s *sampler) run(sub *events.Subscription) {
	defer close(s.done)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		select {
		case <-s.stop:
			sub.Close()
			return
		case now := <-sweep.C:
			s.forget(now.Unix())
		case e, ok := <-sub.C():
			if ok {
				s.count(&e)
				continue
			}
			if !sub.Dropped() {
				return // the bus closed: the server is shutting down
			}
			// The sampler fell behind: the counts of the events lost are
			// missing, but it goes on with the next.
			s.logger.Warn("dashboard: the throughput sampler fell behind the event bus and resubscribed")
			sub, _, _ = s.bus.Subscribe(outcomes, false, 0, sampleBuffer)
		}
	}
}

// close stops the sampler and waits for it. Safe before start (when it
// never started, it does not wait) and idempotent.
func (s *sampler) close(started bool) {
	s.once.Do(func() { close(s.stop) })
	if started {
		<-s.done
	}
}

// count records one event if it is an outcome.
func (s *sampler) count(e *events.Event) {
	var failed bool
	switch e.Type {
	case events.Completed:
	case events.Failed, events.Dead:
		failed = true
	default:
		return
	}
	sec := e.At.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.add(sec, failed)
	q := s.queues[e.Queue]
	if q == nil {
		if len(s.queues) >= maxSampledQueues {
			s.forgetLocked(sec)
			if len(s.queues) >= maxSampledQueues {
				return
			}
		}
		q = &series{}
		s.queues[e.Queue] = q
	}
	q.add(sec, failed)
}

// forget drops the series of queues with nothing counted in the window.
func (s *sampler) forget(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(now)
}

func (s *sampler) forgetLocked(now int64) {
	for name, q := range s.queues {
		if q.last <= now-sampleWindow {
			delete(s.queues, name)
		}
	}
}

// rate is a queue's (or, for "", the node's) completed and failed jobs per
// second over the rateSpan seconds before now.
func (s *sampler) rate(queue string, now time.Time) (completed, failed float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ser := &s.total
	if queue != "" {
		if ser = s.queues[queue]; ser == nil {
			return 0, 0
		}
	}
	end := now.Unix()
	var c, f uint32
	for sec := end - rateSpan + 1; sec <= end; sec++ {
		sc, sf := ser.at(sec)
		c, f = c+sc, f+sf
	}
	return float64(c) / rateSpan, float64(f) / rateSpan
}

// throughput is the per-second chart data: the unix seconds of the last
// span seconds before now, and the completed and failed jobs of each.
type throughput struct {
	T         []int64  `json:"t"`
	Completed []uint32 `json:"completed"`
	Failed    []uint32 `json:"failed"`
}

// series returns the last span seconds (at most sampleWindow) before now:
// of one queue when queue is set; else of the node when allow is nil;
// else the sum of the queues allow lets through (a token limited to
// namespaces sees only its queues).
func (s *sampler) series(queue string, allow func(string) bool, now time.Time, span int) throughput {
	if span <= 0 || span > sampleWindow {
		span = sampleWindow
	}
	end := now.Unix()
	out := throughput{T: make([]int64, span), Completed: make([]uint32, span), Failed: make([]uint32, span)}
	for i := range out.T {
		out.T[i] = end - int64(span-1-i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum []*series
	switch {
	case queue != "":
		if q := s.queues[queue]; q != nil && (allow == nil || allow(queue)) {
			sum = append(sum, q)
		}
	case allow == nil:
		sum = append(sum, &s.total)
	default:
		for name, q := range s.queues {
			if allow(name) {
				sum = append(sum, q)
			}
		}
	}
	for _, ser := range sum {
		for i, sec := range out.T {
			c, f := ser.at(sec)
			out.Completed[i] += c
			out.Failed[i] += f
		}
	}
	return out
}
