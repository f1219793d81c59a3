package pgstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// defaultsTTL bounds how long a node that missed a change's notification
// (settingsTag) keeps using a queue's defaults it read.
const defaultsTTL = time.Second

// defaultsCache keeps the queues' defaults that every enqueue reads while
// this node listens: a change forgets its queue once committed here or on
// arrival of another node's notification, a reconnect of the listener
// forgets all, and an entry lives at most defaultsTTL.
type defaultsCache struct {
	listening atomic.Bool   // the listener is connected
	gen       atomic.Uint64 // bumped by every forget, so that a read that raced one is not kept
	mu        sync.RWMutex
	queues    map[string]cachedDefaults
}

// cachedDefaults are the defaults of a queue that exists.
type cachedDefaults struct {
	d       store.QueueDefaults
	expires time.Time
}

func newDefaultsCache() *defaultsCache {
	return &defaultsCache{queues: make(map[string]cachedDefaults)}
}

// get returns queue's cached defaults and whether they are usable.
func (c *defaultsCache) get(queue string, now time.Time) (cachedDefaults, bool) {
	if !c.listening.Load() {
		return cachedDefaults{}, false
	}
	c.mu.RLock()
	e, ok := c.queues[queue]
	c.mu.RUnlock()
	return e, ok && now.Before(e.expires)
}

// put keeps what a read begun at generation gen found, unless a forget
// came in between.
func (c *defaultsCache) put(queue string, gen uint64, e cachedDefaults) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if len(c.queues) >= maxCachedDefaults {
		clear(c.queues)
	}
	c.queues[queue] = e
}

// maxCachedDefaults bounds the cache; past it, it starts over.
const maxCachedDefaults = 10_000

// forget drops queues, or every queue when queues is nil.
func (c *defaultsCache) forget(queues []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	if queues == nil {
		clear(c.queues)
		return
	}
	for _, q := range queues {
		delete(c.queues, q)
	}
}
