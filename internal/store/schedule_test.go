package store

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestScheduleUpsertStored(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now, tick, next := t0.Add(time.Hour), t0.Add(30*time.Minute), t0.Add(2*time.Hour)
	old := &job.Schedule{Name: "s", Cron: "* * * * *", CreatedAt: t0, UpdatedAt: t0, LastTick: t0.Add(time.Minute),
		LastRunAt: t0.Add(time.Minute), LastJobID: "j1", NextRunAt: t0.Add(2 * time.Minute)}
	def := job.Schedule{Name: "s", Cron: "*/5 * * * *", Paused: true, CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(-time.Hour),
		LastTick: tick, LastRunAt: t0.Add(-time.Hour), LastJobID: "ignored", NextRunAt: next}
	for _, c := range []struct {
		name        string
		old         *job.Schedule
		restart     bool
		exact       bool
		want        job.Schedule
		wantCreated bool
	}{
		{"create", nil, false, false, job.Schedule{Name: "s", Cron: "*/5 * * * *", Paused: true, CreatedAt: now, UpdatedAt: now,
			LastTick: tick, NextRunAt: next}, true},
		{"redefine keeps the last tick and run", old, false, false, job.Schedule{Name: "s", Cron: "*/5 * * * *", Paused: true,
			CreatedAt: t0, UpdatedAt: now, LastTick: old.LastTick, LastRunAt: old.LastRunAt, LastJobID: "j1", NextRunAt: next}, false},
		{"restart takes the new last tick", old, true, false, job.Schedule{Name: "s", Cron: "*/5 * * * *", Paused: true,
			CreatedAt: t0, UpdatedAt: now, LastTick: tick, LastRunAt: old.LastRunAt, LastJobID: "j1", NextRunAt: next}, false},
		{"exact over a schedule", old, true, true, def, false},
		{"exact creates", nil, false, true, def, true},
	} {
		p := ScheduleUpsertParams{Schedule: def, Restart: c.restart, Exact: c.exact, Now: now}
		got, created := p.Stored(c.old)
		if got.Cron != c.want.Cron || got.Paused != c.want.Paused || !got.CreatedAt.Equal(c.want.CreatedAt) ||
			!got.UpdatedAt.Equal(c.want.UpdatedAt) || !got.LastTick.Equal(c.want.LastTick) ||
			!got.LastRunAt.Equal(c.want.LastRunAt) || got.LastJobID != c.want.LastJobID ||
			!got.NextRunAt.Equal(c.want.NextRunAt) || created != c.wantCreated {
			t.Errorf("%s: Stored() = %+v, %v; want %+v, %v", c.name, got, created, c.want, c.wantCreated)
		}
	}
}

func TestScheduleFireOne(t *testing.T) {
	t.Parallel()
	jobs := []InsertResult{{Job: &job.Job{ID: "a"}}}
	for _, c := range []struct {
		name   string
		manual bool
		res    ScheduleFireResult
		want   error
	}{
		{"fired", false, ScheduleFireResult{Jobs: jobs}, nil},
		{"fired by hand", true, ScheduleFireResult{Jobs: jobs}, nil},
		{"moved", false, ScheduleFireResult{Moved: true}, ErrScheduleMoved},
		{"gone, by hand", true, ScheduleFireResult{Moved: true}, job.ErrNotFound},
	} {
		p := ScheduleFireParams{Name: "s", Manual: c.manual}
		got, err := p.FireOne(c.res)
		if c.want == nil && (err != nil || len(got) != 1) || c.want != nil && (!errors.Is(err, c.want) || got != nil) {
			t.Errorf("%s: FireOne() = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if err := CheckFireMany([]*ScheduleFireParams{{Name: "a"}, {Name: "b", Manual: true}}); err == nil {
		t.Error("CheckFireMany accepted a firing by hand")
	}
	if err := CheckFireMany([]*ScheduleFireParams{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Errorf("CheckFireMany refused timed firings: %v", err)
	}
}
