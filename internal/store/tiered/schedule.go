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
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*job.Schedule, bool, error) {
	return s.disk.ScheduleUpsert(ctx, p)
}

// ScheduleGet reads a schedule; see store.Scheduler.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*job.Schedule, error) {
	return s.disk.ScheduleGet(ctx, name)
}

// ScheduleList lists the schedules; see store.Scheduler.
func (s *Store) ScheduleList(ctx context.Context) ([]*job.Schedule, error) {
	return s.disk.ScheduleList(ctx)
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (s *Store) ScheduleDelete(ctx context.Context, name string) error {
	return s.disk.ScheduleDelete(ctx, name)
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (s *Store) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*job.Schedule, error) {
	return s.disk.ScheduleSetPaused(ctx, name, paused, now)
}

// ScheduleDue lists the schedules due; see store.Scheduler.
func (s *Store) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*job.Schedule, time.Time, error) {
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

// ScheduleFireMany records every firing in one firing of the durable
// store, with the durable jobs, then puts the memory jobs in the memory
// tier, as ScheduleFire does; see store.Scheduler.
func (s *Store) ScheduleFireMany(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	record := make([]*store.ScheduleFireParams, len(fires))
	inMemory := make([]bool, len(fires))
	var durable []store.JobInsertParams
	for i, p := range fires {
		record[i] = p
		if memoryJobs(p.Jobs) {
			q := *p
			q.Jobs, q.Enqueued = nil, p.Jobs[len(p.Jobs)-1].ID
			record[i], inMemory[i] = &q, true
			continue
		}
		durable = append(durable, p.Jobs...)
	}
	out, err := s.fireDurable(ctx, record, inMemory, durable)
	if err != nil {
		return nil, err
	}
	var mem []store.JobInsertParams
	for i, p := range fires {
		if inMemory[i] && !out[i].Moved {
			mem = append(mem, p.Jobs...)
		}
	}
	if len(mem) == 0 {
		return out, nil
	}
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: mem, Now: fires[0].Now})
	if err != nil {
		return nil, err
	}
	for i, p := range fires {
		if inMemory[i] && !out[i].Moved {
			out[i].Jobs, res = res[:len(p.Jobs):len(p.Jobs)], res[len(p.Jobs):]
		}
	}
	return out, nil
}

// memoryJobs reports whether jobs are some, all of memory durability.
func memoryJobs(jobs []store.JobInsertParams) bool {
	memory := len(jobs) > 0
	for i := range jobs {
		memory = memory && jobs[i].Durability == job.DurabilityMemory
	}
	return memory
}

// fireDurable fires record in the durable store, whose firings not
// inMemory carry durable, their jobs in order, with the ids of those jobs
// one space with the memory tier's (see guarded).
func (s *Store) fireDurable(ctx context.Context, record []*store.ScheduleFireParams, inMemory []bool,
	durable []store.JobInsertParams) ([]store.ScheduleFireResult, error) {
	if len(durable) == 0 || !s.used.Load() {
		s.gate.RLock()
		if !s.used.Load() {
			defer s.gate.RUnlock()
			return s.disk.ScheduleFireMany(ctx, record)
		}
		s.gate.RUnlock()
	}
	var out []store.ScheduleFireResult
	res, err := s.guarded(ctx, durable, "jobs", s.mem, false, true, func(rest []store.JobInsertParams) ([]store.InsertResult, error) {
		left := make(map[string]struct{}, len(rest))
		for i := range rest {
			left[rest[i].ID] = struct{}{}
		}
		fires := make([]*store.ScheduleFireParams, len(record))
		for i, p := range record {
			fires[i] = p
			if inMemory[i] {
				continue
			}
			q := *p
			q.Jobs = nil
			for _, jp := range p.Jobs {
				if _, ok := left[jp.ID]; ok {
					q.Jobs = append(q.Jobs, jp)
				}
			}
			fires[i] = &q
		}
		var err error
		if out, err = s.disk.ScheduleFireMany(ctx, fires); err != nil {
			return nil, err
		}
		// The results of rest, in order; a moved firing's are left empty.
		res := make([]store.InsertResult, 0, len(rest))
		for i, p := range fires {
			switch {
			case inMemory[i]:
			case out[i].Moved:
				res = append(res, make([]store.InsertResult, len(p.Jobs))...)
			default:
				res = append(res, out[i].Jobs...)
			}
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	for i, p := range record {
		if inMemory[i] {
			continue
		}
		n := len(p.Jobs)
		if !out[i].Moved {
			out[i].Jobs = res[:n:n]
		}
		res = res[n:]
	}
	return out, nil
}
