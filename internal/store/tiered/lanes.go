package tiered

import (
	"context"
	"errors"
	"fmt"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Consumer groups live in both tiers: each tier copies its own jobs into
// the groups' lanes. The durable store's list is the one kept over a
// restart; New gives the memory tier its groups.

// ConsumerGroupCreate creates the group in both tiers; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupCreate(ctx context.Context, p *store.ConsumerGroupParams) (bool, error) {
	created, err := s.disk.ConsumerGroupCreate(ctx, p)
	if err != nil {
		return false, err
	}
	if _, err := s.mem.ConsumerGroupCreate(ctx, p); err != nil {
		return false, err
	}
	return created, nil
}

// ConsumerGroupSeek moves the group in both tiers; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupSeek(ctx context.Context, p *store.ConsumerGroupParams) (int, error) {
	n, err := s.disk.ConsumerGroupSeek(ctx, p)
	if err != nil {
		return 0, err
	}
	m, err := s.mem.ConsumerGroupSeek(ctx, p)
	if err != nil && !errors.Is(err, job.ErrNotFound) {
		return 0, err
	}
	return n + m, nil
}

// ConsumerGroupDelete deletes the group in both tiers; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupDelete(ctx context.Context, queue, name string) error {
	if err := s.disk.ConsumerGroupDelete(ctx, queue, name); err != nil {
		return err
	}
	if err := s.mem.ConsumerGroupDelete(ctx, queue, name); err != nil && !errors.Is(err, job.ErrNotFound) {
		return err
	}
	return nil
}

// ConsumerGroupList lists the durable store's groups with the counts of
// both tiers; see store.ConsumerGroups.
func (s *Store) ConsumerGroupList(ctx context.Context, queue string) ([]store.ConsumerGroup, error) {
	gs, err := s.disk.ConsumerGroupList(ctx, queue)
	if err != nil || !s.used.Load() {
		return gs, err
	}
	mem, err := s.mem.ConsumerGroupList(ctx, queue)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]store.ConsumerGroup, len(mem))
	for _, m := range mem {
		byName[m.Name] = m
	}
	for i := range gs {
		m, ok := byName[gs[i].Name]
		if !ok {
			continue
		}
		for st, n := range m.Counts {
			gs[i].Counts[st] += n
		}
		if o := m.OldestPending; !o.IsZero() && (gs[i].OldestPending.IsZero() || o.Before(gs[i].OldestPending)) {
			gs[i].OldestPending = o
		}
	}
	return gs, nil
}

// copyGroups gives the memory tier the consumer groups of the durable
// store's queues qs.
func copyGroups(ctx context.Context, disk Tier, mem MemoryStore, qs []store.QueueInfo) error {
	for _, q := range qs {
		gs, err := disk.ConsumerGroupList(ctx, q.Name)
		if err != nil {
			return fmt.Errorf("read consumer groups of %s: %w", q.Name, err)
		}
		for _, g := range gs {
			p := &store.ConsumerGroupParams{Queue: q.Name, Name: g.Name, Start: store.StartNew, Now: g.CreatedAt}
			if _, err := mem.ConsumerGroupCreate(ctx, p); err != nil {
				return fmt.Errorf("create consumer group %s of %s in memory: %w", g.Name, q.Name, err)
			}
		}
	}
	return nil
}
