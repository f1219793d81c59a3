package dashboard

import (
	"errors"
	"log/slog"
	"math"
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
	// sampleChunk is how many events the sampler copies from the bus at a
	// time.
	sampleChunk = 256
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
// the node, from the engine's event bus (a reader of it): the rates and the throughput
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

// outcomes lets through the events the sampler counts.
var outcomes = events.Filter{Types: []events.Type{events.Completed, events.Failed, events.Dead}}

// start follows the bus and counts until stop is called or the bus
// closes.
func (s *sampler) start() {
	rd, _ := s.bus.Follow(outcomes, false, events.ID{})
	go s.run(rd)
}

func (s *sampler) run(rd *events.Reader) {
	defer close(s.done)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	buf := make([]events.Event, 0, sampleChunk)
	for {
		evs, wait, err := rd.Read(buf, math.MaxInt)
		switch {
		case errors.Is(err, events.ErrClosed):
			return // the server is shutting down
		case errors.Is(err, events.ErrBehind):
			// The counts of the events lost are missing; it goes on with
			// the oldest the bus keeps.
			s.logger.Warn("dashboard: the throughput sampler fell behind the event bus")
		}
		for i := range evs {
			s.count(&evs[i])
		}
		if wait == nil { // more to read at once
			select {
			case <-s.stop:
				return
			default:
				continue
			}
		}
		select {
		case <-s.stop:
			return
		case now := <-sweep.C:
			s.forget(now.Unix())
		case <-wait:
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
