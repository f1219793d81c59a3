package engine

import (
	"sync"
)

// maxCachedLanes bounds the lanes a laneCache keeps; past it, it starts
// over.
const maxCachedLanes = 100_000

// laneCache keeps the lanes (job.LaneName: the queues that hold the
// consumer groups' copies) of the consumer groups that fetches found to
// exist, so that a fetch of a consumer group asks the store once. A lane
// is forgotten when its consumer group is deleted, on this node
// (Engine.DeleteConsumerGroup) or on another (Engine.ForgetConsumerGroups,
// from the store's notifications), and every lane when the store may have
// missed such news. A read of the store that raced a forget is not kept,
// so a consumer group deleted once the read began is never remembered as
// existing.
type laneCache struct {
	mu    sync.RWMutex
	gen   uint64 // bumped by every forget
	lanes map[string]struct{}
}

func newLaneCache() *laneCache {
	return &laneCache{lanes: make(map[string]struct{})}
}

// has reports whether lane is known to exist.
func (c *laneCache) has(lane string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.lanes[lane]
	return ok
}

// generation is the value to hand put for a read of the store that
// begins now.
func (c *laneCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// put keeps lane, which a read that began at generation gen found to
// exist, unless a forget came in between.
func (c *laneCache) put(lane string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.lanes) >= maxCachedLanes {
		clear(c.lanes)
	}
	c.lanes[lane] = struct{}{}
}

// forget drops lanes, or every lane when lanes is nil.
func (c *laneCache) forget(lanes []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if lanes == nil {
		clear(c.lanes)
		return
	}
	for _, l := range lanes {
		delete(c.lanes, l)
	}
}
