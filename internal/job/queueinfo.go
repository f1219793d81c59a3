package job

import "time"

// QueueInfo describes one queue.
type QueueInfo struct {
	Name   string
	Paused bool
	// Durability is the level of jobs enqueued without one: full unless
	// set with QueueSetDurability.
	Durability Durability
	// Limits is the queue's flow control; zero when it has none.
	Limits Limits
	// Settings are the queue's settings (dead-letter queue, maximum
	// wait); zero when it has none.
	Settings QueueSettings
	// Counts has the number of jobs in every state (zero states included).
	Counts map[State]int64
	// OldestAvailable is the earliest run time among the queue's
	// available jobs (those not handed out), so that the age of the
	// oldest waiting job is known from the listing; zero when none is
	// available. QueueList sets it, QueueGet leaves it zero. A store
	// finds it with a few index seeks per queue (about one per priority,
	// and per group of a grouped queue, that its available jobs use),
	// never a scan of the jobs.
	OldestAvailable time.Time
}
