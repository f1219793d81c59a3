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
func (s *Store) ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	gs, err := s.disk.ConsumerGroupList(ctx, queue)
	if err != nil || !s.used.Load() {
		return gs, err
	}
	mem, err := s.mem.ConsumerGroupList(ctx, queue)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]job.ConsumerGroup, len(mem))
	for _, m := range mem {
		byName[m.Name] = m
	}
	for i := range gs {
		if m, ok := byName[gs[i].Name]; ok {
			merge(&gs[i], &m)
		}
	}
	return gs, nil
}

// ConsumerGroupListAll lists a page of the durable store's groups with
// the counts of both tiers; see store.ConsumerGroups.
func (s *Store) ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	gs, err := s.disk.ConsumerGroupListAll(ctx, p)
	if err != nil || !s.used.Load() || len(gs) == 0 {
		return gs, err
	}
	// The memory tier has the same groups: its page from the same place
	// holds those of gs (and maybe more past them, left out).
	mem, err := s.mem.ConsumerGroupListAll(ctx, p)
	if err != nil {
		return nil, err
	}
	type key struct{ queue, name string }
	byKey := make(map[key]job.ConsumerGroup, len(mem))
	for _, m := range mem {
		byKey[key{m.Queue, m.Name}] = m
	}
	for i := range gs {
		if m, ok := byKey[key{gs[i].Queue, gs[i].Name}]; ok {
			merge(&gs[i], &m)
		}
	}
	return gs, nil
}

// merge adds the counts and oldest pending job of m, the same group in
// the memory tier, to g.
func merge(g, m *job.ConsumerGroup) {
	for st, n := range m.Counts {
		g.Counts[st] += n
	}
	if o := m.OldestPending; !o.IsZero() && (g.OldestPending.IsZero() || o.Before(g.OldestPending)) {
		g.OldestPending = o
	}
}

// copyGroups gives the memory tier the consumer groups of the durable
// store, a page of groups at a time.
func copyGroups(ctx context.Context, disk Tier, mem MemoryStore) error {
	p := &job.ConsumerGroupListParams{}
	for {
		gs, err := disk.ConsumerGroupListAll(ctx, p)
		if err != nil {
			return fmt.Errorf("read consumer groups: %w", err)
		}
		for _, g := range gs {
			cp := &store.ConsumerGroupParams{Queue: g.Queue, Name: g.Name, Start: job.StartNew, Now: g.CreatedAt}
			if _, err := mem.ConsumerGroupCreate(ctx, cp); err != nil {
				return fmt.Errorf("create consumer group %s of %s in memory: %w", g.Name, g.Queue, err)
			}
		}
		if len(gs) < p.PageSize() {
			return nil
		}
		p.AfterQueue, p.AfterName = gs[len(gs)-1].Queue, gs[len(gs)-1].Name
	}
}
