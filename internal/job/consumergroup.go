package job

import "time"

// MaxConsumerGroupPage bounds a page of ConsumerGroupListAll.
const MaxConsumerGroupPage = 1000

// ConsumerGroupListParams pages through the consumer groups of every
// queue.
type ConsumerGroupListParams struct {
	// AfterQueue and AfterName name the last group of the previous page:
	// the page starts after it in (queue, name) byte order. Both empty
	// start at the first group; AfterQueue alone starts at the first
	// group of that queue.
	AfterQueue, AfterName string
	// Limit bounds the page. Defaults to MaxConsumerGroupPage, which it
	// may not pass.
	Limit int
}

// PageSize is the page size p asks for: Limit, within 1 and
// MaxConsumerGroupPage, or MaxConsumerGroupPage when it is not set.
func (p *ConsumerGroupListParams) PageSize() int {
	if p.Limit <= 0 || p.Limit > MaxConsumerGroupPage {
		return MaxConsumerGroupPage
	}
	return p.Limit
}

// ConsumerGroupStart says which of a queue's jobs a consumer group starts with.
type ConsumerGroupStart int

// The starts of a consumer group.
const (
	// StartBeginning starts with every job of the queue the store still
	// holds, finished ones included.
	StartBeginning ConsumerGroupStart = iota
	// StartNew starts with the jobs inserted from now on.
	StartNew
	// StartAt starts with the jobs created at or after From.
	StartAt
)

// ConsumerGroup is a consumer group of a queue and where it stands.
type ConsumerGroup struct {
	Queue string
	Name  string
	// CreatedAt is when the group was created.
	CreatedAt time.Time
	// Counts has the number of the group's jobs in every state.
	Counts map[State]int64
	// OldestPending is when the oldest job the group has not finished was
	// created; zero when it has finished every
	OldestPending time.Time
}
