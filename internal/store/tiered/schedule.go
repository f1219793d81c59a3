package tiered

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Schedules live in the durable store. A firing whose jobs are of memory
// durability records the firing there first, then puts the jobs in the
// memory tier: a crash in between loses jobs a crash would lose anyway.

// ScheduleUpsert stores a schedule in the durable store; see
// store.Scheduler.
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*store.Schedule, bool, error) {
	return s.disk.ScheduleUpsert(ctx, p)
}

// ScheduleGet reads a schedule; see store.Scheduler.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.Schedule, error) {
	return s.disk.ScheduleGet(ctx, name)
}

// ScheduleList lists the schedules; see store.Scheduler.
func (s *Store) ScheduleList(ctx context.Context) ([]*store.Schedule, error) {
	return s.disk.ScheduleList(ctx)
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (s *Store) ScheduleDelete(ctx context.Context, name string) error {
	return s.disk.ScheduleDelete(ctx, name)
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (s *Store) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*store.Schedule, error) {
	return s.disk.ScheduleSetPaused(ctx, name, paused, now)
}

// ScheduleDue lists the schedules due; see store.Scheduler.
func (s *Store) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, time.Time, error) {
	return s.disk.ScheduleDue(ctx, now, limit)
}

// ScheduleFire records a firing and inserts its jobs in their tier; see
// store.Scheduler.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]store.InsertResult, error) {
	memory := len(p.Jobs) > 0
	for i := range p.Jobs {
		memory = memory && p.Jobs[i].Durability == job.DurabilityMemory
	}
	if !memory {
		if len(p.Jobs) == 0 || !s.used.Load() {
			s.gate.RLock()
			if !s.used.Load() {
				defer s.gate.RUnlock()
				return s.disk.ScheduleFire(ctx, p)
			}
			s.gate.RUnlock()
		}
		return s.guarded(ctx, p.Jobs, "jobs", s.mem, false, true, func(rest []store.JobInsertParams) ([]store.InsertResult, error) {
			q := *p
			q.Jobs = rest
			return s.disk.ScheduleFire(ctx, &q)
		})
	}
	record := *p
	record.Jobs, record.Enqueued = nil, p.Jobs[len(p.Jobs)-1].ID
	if _, err := s.disk.ScheduleFire(ctx, &record); err != nil {
		return nil, err
	}
	return s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: p.Jobs, Now: p.Now})
}
