package pgstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/store"
)

// defaultsTTL is how long a node trusts a queue's defaults it read, when
// nothing said they changed. A change on any node reaches the others at
// once through a notification (settingsTag); the time bounds only what
// a node that missed one could keep using.
const defaultsTTL = time.Second

// The tags that follow a node's id in a notification about something
// other than available jobs. Node ids are hex, so a tag never makes
// another node's id: a node of an older version reads such a
// notification as jobs made available, which only wakes its fetches.
const (
	// settingsTag: the queues' defaults changed.
	settingsTag = "!settings"
	// groupsTag: consumer groups were deleted; the names are their lanes.
	groupsTag = "!groups"
)

// defaultsCache keeps the queues' defaults (QueueDefaults) that every
// enqueue reads, while this node listens to the others' notifications:
// a change on this node forgets its queue once committed, a change
// announced by another forgets it on arrival, a reconnect of the listener
// forgets all, and an entry lives at most defaultsTTL.
type defaultsCache struct {
	listening atomic.Bool   // the listener is connected
	gen       atomic.Uint64 // bumped by every forget, so that a read that raced one is not kept
	mu        sync.RWMutex
	queues    map[string]cachedDefaults
}

type cachedDefaults struct {
	d       store.QueueDefaults
	found   bool
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

// put keeps what a read that began at generation gen found, unless a
// forget came in between.
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

// announceSettings tells the other nodes, when tx commits, that queue's
// defaults changed.
func (s *Store) announceSettings(ctx context.Context, tx pgx.Tx, queue string) error {
	_, err := tx.Exec(ctx, sqlNotify, s.channel, s.node+settingsTag+" "+queue)
	return err
}

// announceGroupDeleted tells the other nodes, when tx commits, that the
// consumer group of lane is gone.
func (s *Store) announceGroupDeleted(ctx context.Context, tx pgx.Tx, lane string) error {
	_, err := tx.Exec(ctx, sqlNotify, s.channel, s.node+groupsTag+" "+lane)
	return err
}

// readNotification splits a notification's payload into the sending node,
// its tag (settingsTag, groupsTag, or empty for available jobs) and the
// names it carries.
func readNotification(payload string) (node, tag string, queues []string, ok bool) {
	head, list, ok := strings.Cut(payload, " ")
	if !ok || list == "" {
		return "", "", nil, false
	}
	node = head
	if i := strings.IndexByte(head, '!'); i >= 0 {
		node, tag = head[:i], head[i:]
	}
	return node, tag, strings.Split(list, ","), true
}
