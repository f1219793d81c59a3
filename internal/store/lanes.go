package store

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// ConsumerGroups keeps the consumer groups of queues: each group receives
// every job of its queue on its own, as a copy (CopyOf) in the group's
// lane (job.LaneName), a queue whose jobs are claimed, acked, failed,
// retried and pruned like any other's. Fetches without a group take the
// queue's own jobs, as they always did.
type ConsumerGroups interface {
	// ConsumerGroupCreate creates consumer group p.Name of queue p.Queue
	// (creating the queue if unknown) and gives it a copy of each job of
	// the queue that p.Start names. From then on every job inserted into
	// the queue gets a copy in the group's lane, in the same transaction.
	// The lane takes the queue's limits and pause, and follows every later
	// change of them. created is false, and nothing changes, when the group
	// exists.
	ConsumerGroupCreate(ctx context.Context, p *ConsumerGroupParams) (created bool, err error)
	// ConsumerGroupSeek moves an existing group (job.ErrNotFound
	// otherwise) to the start p names: it deletes every job of the group's
	// lane, active ones too (their workers' calls then find no job), and
	// gives the group a copy of each job of the queue that p.Start names.
	// It returns how many copies it made.
	ConsumerGroupSeek(ctx context.Context, p *ConsumerGroupParams) (int, error)
	// ConsumerGroupDelete deletes a group and every job of its lane;
	// job.ErrNotFound for an unknown one.
	ConsumerGroupDelete(ctx context.Context, queue, name string) error
	// ConsumerGroupList lists the groups of queue by name, with the counts
	// of their lanes. An unknown queue has none.
	ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error)
	// ConsumerGroupListAll lists the groups of every queue, by queue then
	// name (byte order), each as ConsumerGroupList gives it: one page of
	// at most p.PageSize() groups, after the group p names. Its cost
	// grows with the groups it lists, never with the queues that have
	// none.
	ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error)
}

// ConsumerGroupParams creates or moves a consumer group.
type ConsumerGroupParams struct {
	Queue string
	Name  string
	Start job.ConsumerGroupStart
	// From is the first creation time of the jobs StartAt takes.
	From time.Time
	Now  time.Time
}

// Since is where the start of p begins, for every store: none when it
// takes no job (StartNew); otherwise the jobs of the queue created at or
// after from, every job when from is zero. An unknown start is refused.
func (p *ConsumerGroupParams) Since() (from time.Time, none bool, err error) {
	switch p.Start {
	case job.StartNew:
		return time.Time{}, true, nil
	case job.StartBeginning:
		return time.Time{}, false, nil
	case job.StartAt:
		return p.From, false, nil
	}
	return time.Time{}, false, job.Invalid("start", "unknown start %d", p.Start)
}

// CopyOf is the insert of consumer group group's copy of j: a new job of
// the group's lane with the copy's id, j's kind, payload, priority,
// group, tags, retry policy, lease, durability and traceparent, due when
// j is (at once if that is past), created when j was, with no attempt
// made.
func CopyOf(j *job.Job, group string, now time.Time) JobInsertParams {
	p := JobInsertParams{
		ID: job.CopyID(j.ID, group), Queue: job.LaneName(j.Queue, group), Kind: j.Kind, Payload: j.Payload,
		Priority: j.Priority, State: job.StateAvailable, RunAt: j.RunAt, MaxAttempts: j.MaxAttempts,
		Backoff: j.Backoff, LeaseDuration: j.LeaseDuration, Tags: j.Tags, Group: j.Group,
		Durability: j.Durability, CreatedAt: j.CreatedAt, TraceParent: j.TraceParent,
	}
	if j.RunAt.After(now) {
		p.State = job.StateScheduled
	}
	return p
}

// CopyOfInsert is CopyOf for a job being inserted, before it is stored.
func CopyOfInsert(p *JobInsertParams, group string, now time.Time) JobInsertParams {
	c := *p
	c.ID, c.Queue = job.CopyID(p.ID, group), job.LaneName(p.Queue, group)
	c.UniqueKey, c.UniqueFor = "", 0
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	return c
}
