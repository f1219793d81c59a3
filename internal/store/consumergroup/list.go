// Package consumergroup lists consumer groups (store.ConsumerGroups) the
// same way for every store: a store reads its groups' rows and its lanes'
// standing, each as its tables allow, and List puts them together.
package consumergroup

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/internal/job"
)

// Reader is one store's reading of its consumer groups, beside its writes.
type Reader interface {
	// Groups reads the groups of queue by name when p is nil, otherwise
	// a page of at most p.PageSize() groups of every queue after the
	// group p names, by queue then name (byte order); each with its
	// queue, name and creation time only.
	Groups(ctx context.Context, queue string, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error)
	// Standing reads the lane (job.LaneName) of each group of gs and
	// adds its counts to the group's Counts, which hold every state, and
	// sets its OldestPending.
	Standing(ctx context.Context, gs []job.ConsumerGroup) error
}

// List lists the groups of queue, or the page p names (see
// Reader.Groups), each with the counts of its lane in every state and
// the creation time of its oldest pending job.
func List(ctx context.Context, r Reader, queue string, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	gs, err := r.Groups(ctx, queue, p)
	if err != nil {
		return nil, fmt.Errorf("read consumer groups: %w", err)
	}
	if gs == nil {
		gs = []job.ConsumerGroup{}
	}
	for i := range gs {
		gs[i].Counts = make(map[job.State]int64, len(job.States))
		for _, st := range job.States {
			gs[i].Counts[st] = 0
		}
	}
	if len(gs) == 0 {
		return gs, nil
	}
	if err := r.Standing(ctx, gs); err != nil {
		return nil, fmt.Errorf("read the lanes of consumer groups: %w", err)
	}
	return gs, nil
}
