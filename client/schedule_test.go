package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// A schedule goes through its whole life over each transport: put (created,
// then replaced), get, list, pause, trigger, resume and delete.
func TestScheduleCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		spec := client.ScheduleSpec{
			Job:      client.EnqueueParams{Queue: "reports", Kind: "build", Payload: map[string]int{"x": 1}, Priority: 3},
			Cron:     "0 3 * * *",
			Timezone: "Europe/Berlin",
			Misfire:  client.MisfireCatchUp, MaxCatchUp: 10,
		}
		s, created, err := b.c.PutSchedule(b.ctx, "nightly", spec)
		if err != nil || !created {
			t.Fatalf("put a new schedule: %+v, created %v, %v", s, created, err)
		}
		if s.Name != "nightly" || s.Cron != "0 3 * * *" || s.Timezone != "Europe/Berlin" || s.Every != 0 ||
			s.Misfire != client.MisfireCatchUp || s.MaxCatchUp != 10 || s.Paused || s.LastJobID != "" || !s.LastRunAt.IsZero() {
			t.Fatalf("new schedule: %+v", s)
		}
		if want := `{"queue":"reports","kind":"build","payload":{"x":1},"priority":3}`; string(s.Job) != want {
			t.Fatalf("job template %s, want %s", s.Job, want)
		}
		if s.NextRunAt.Before(time.Now()) || s.NextRunAt.After(time.Now().Add(25*time.Hour)) || s.NextRunAt.Minute() != 0 {
			t.Fatalf("next run at %v", s.NextRunAt)
		}

		spec.Misfire, spec.MaxCatchUp = "", 0
		s, created, err = b.c.PutSchedule(b.ctx, "nightly", spec)
		if err != nil || created || s.Misfire != client.MisfireSkip || s.MaxCatchUp != 100 {
			t.Fatalf("replace with the defaults: %+v, created %v, %v", s, created, err)
		}
		got, err := b.c.GetSchedule(b.ctx, "nightly")
		if err != nil || got.Name != "nightly" || !got.CreatedAt.Equal(s.CreatedAt) || !got.UpdatedAt.Equal(s.UpdatedAt) {
			t.Fatalf("get: %+v, %v (put answered %+v)", got, err, s)
		}
		if _, _, err := b.c.PutSchedule(b.ctx, "every", client.ScheduleSpec{
			Job: client.EnqueueParams{Kind: "k"}, Every: time.Hour, Paused: true,
		}); err != nil {
			t.Fatal(err)
		}
		list, err := b.c.ListSchedules(b.ctx)
		if err != nil || len(list) != 2 || list[0].Name != "every" || list[1].Name != "nightly" {
			t.Fatalf("list: %+v, %v", list, err)
		}
		if e := list[0]; e.Every != time.Hour || e.Cron != "" || e.Timezone != "" || !e.Paused || !e.NextRunAt.Equal(e.NextRunAt.Truncate(time.Hour)) {
			t.Fatalf("interval schedule: %+v", e)
		}

		if s, err = b.c.PauseSchedule(b.ctx, "nightly"); err != nil || !s.Paused {
			t.Fatalf("pause: %+v, %v", s, err)
		}
		fired, err := b.c.TriggerSchedule(b.ctx, "nightly")
		if err != nil || fired.Job.ID == "" || fired.Job.State != client.StateAvailable || fired.Job.Duplicate {
			t.Fatalf("trigger: %+v, %v", fired, err)
		}
		if fs := fired.Schedule; fs.LastJobID != fired.Job.ID || fs.LastRunAt.IsZero() || !fs.Paused || !fs.NextRunAt.Equal(s.NextRunAt) {
			t.Fatalf("schedule after a trigger: %+v (before %+v)", fs, s)
		}
		j := b.get(fired.Job.ID)
		if j.Queue != "reports" || j.Kind != "build" || string(j.Payload) != `{"x":1}` || j.Priority != 3 {
			t.Fatalf("triggered job: %+v", j)
		}
		if s, err = b.c.ResumeSchedule(b.ctx, "nightly"); err != nil || s.Paused {
			t.Fatalf("resume: %+v, %v", s, err)
		}

		if err := b.c.DeleteSchedule(b.ctx, "nightly"); err != nil {
			t.Fatal(err)
		}
		b.get(fired.Job.ID) // the schedule's jobs stay
		for what, call := range map[string]func() error{
			"get":     func() error { _, err := b.c.GetSchedule(b.ctx, "nightly"); return err },
			"delete":  func() error { return b.c.DeleteSchedule(b.ctx, "nightly") },
			"pause":   func() error { _, err := b.c.PauseSchedule(b.ctx, "nightly"); return err },
			"resume":  func() error { _, err := b.c.ResumeSchedule(b.ctx, "nightly"); return err },
			"trigger": func() error { _, err := b.c.TriggerSchedule(b.ctx, "nightly"); return err },
			"empty":   func() error { _, err := b.c.GetSchedule(b.ctx, ""); return err },
		} {
			err := call()
			var e *client.Error
			if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &e) || e.Status != 404 {
				t.Errorf("%s of a deleted schedule: %v, want ErrNotFound", what, err)
			}
		}
	})
}

// A schedule that fires every second enqueues its ticks' jobs, each with
// the id of its tick: the name and the tick in Unix milliseconds.
func TestScheduleFiresTicks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, _, err := b.c.PutSchedule(b.ctx, "pulse", client.ScheduleSpec{
		Job: client.EnqueueParams{Queue: "pulse", Kind: "beat"}, Every: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var page *client.JobPage
	for {
		var err error
		if page, err = b.c.List(b.ctx, client.ListParams{Queue: "pulse"}); err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tick fired within 10 s of a schedule firing every second")
		}
		time.Sleep(20 * time.Millisecond)
	}
	j := page.Jobs[0]
	ms, err := strconv.ParseInt(strings.TrimPrefix(j.ID, "pulse:"), 10, 64)
	if !strings.HasPrefix(j.ID, "pulse:") || err != nil || ms%1000 != 0 || j.Kind != "beat" {
		t.Fatalf("tick job %+v: want the id pulse:<a whole second in Unix milliseconds>", j)
	}
	s, err := b.c.GetSchedule(b.ctx, "pulse")
	if err != nil || !strings.HasPrefix(s.LastJobID, "pulse:") || s.LastRunAt.IsZero() {
		t.Fatalf("schedule after firing: %+v, %v", s, err)
	}
}

// Invalid definitions are refused with ErrInvalidArgument naming the
// field, and store nothing.
func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	job := client.EnqueueParams{Kind: "k"}
	for _, c := range []struct {
		name  string
		spec  client.ScheduleSpec
		field string
	}{
		{"s", client.ScheduleSpec{Job: job}, "cron"},
		{"s", client.ScheduleSpec{Job: job, Cron: "often"}, "cron"},
		{"s", client.ScheduleSpec{Job: job, Cron: "@every 5m"}, "cron"},
		{"s", client.ScheduleSpec{Job: job, Cron: "@daily", Every: time.Minute}, "every_ms"},
		{"s", client.ScheduleSpec{Job: job, Every: 10 * time.Millisecond}, "every_ms"},
		{"s", client.ScheduleSpec{Job: job, Every: time.Minute, Timezone: "UTC"}, "timezone"},
		{"s", client.ScheduleSpec{Job: job, Cron: "@daily", Timezone: "Mars/Olympus"}, "timezone"},
		{"s", client.ScheduleSpec{Job: job, Cron: "@daily", Misfire: "sometimes"}, "misfire"},
		{"s", client.ScheduleSpec{Job: job, Cron: "@daily", MaxCatchUp: 10_001}, "max_catch_up"},
		{"s", client.ScheduleSpec{Job: client.EnqueueParams{Queue: "q"}, Cron: "@daily"}, "job.kind"},
		{"s", client.ScheduleSpec{Job: client.EnqueueParams{Kind: "k", ID: "x"}, Cron: "@daily"}, "job.id"},
		{"s", client.ScheduleSpec{Job: client.EnqueueParams{Kind: "k", RunAt: time.Now().Add(time.Hour)}, Cron: "@daily"}, "job.run_at"},
		{"s", client.ScheduleSpec{Job: client.EnqueueParams{Kind: "k", Priority: 5000}, Cron: "@daily"}, "job.priority"},
		{strings.Repeat("n", 101), client.ScheduleSpec{Job: job, Cron: "@daily"}, "name"},
		{"-s", client.ScheduleSpec{Job: job, Cron: "@daily"}, "name"},
		{"", client.ScheduleSpec{Job: job, Cron: "@daily"}, "name"},
	} {
		_, _, err := b.c.PutSchedule(b.ctx, c.name, c.spec)
		var e *client.Error
		if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("put %q %+v: %v, want ErrInvalidArgument on %s", c.name, c.spec, err, c.field)
		}
	}
	if _, _, err := b.c.PutSchedule(b.ctx, "s", client.ScheduleSpec{Job: client.EnqueueParams{Kind: "k", Payload: json.RawMessage(`{bad`)}, Cron: "@daily"}); err == nil {
		t.Error("a template with a payload that is not JSON was sent")
	}
	if list, err := b.c.ListSchedules(b.ctx); err != nil || len(list) != 0 {
		t.Fatalf("refused definitions stored schedules: %+v, %v", list, err)
	}
}

// Schedules need the manage permission to define, and read to list.
func TestScheduleRoles(t *testing.T) {
	t.Parallel()
	base := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	prod := client.New(base, client.WithToken(producerToken))
	t.Cleanup(prod.CloseIdleConnections)
	spec := client.ScheduleSpec{Job: client.EnqueueParams{Queue: "mail.out", Kind: "k"}, Cron: "@daily"}
	if _, _, err := prod.PutSchedule(ctx, "mail.daily", spec); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("put with a producer token: %v, want ErrForbidden", err)
	}
	if list, err := prod.ListSchedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list with a producer token: %+v, %v", list, err)
	}
}

func TestScheduleJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := client.Schedule{
		Name: "s", Every: 90 * time.Second, Misfire: client.MisfireRunOnce, MaxCatchUp: 7,
		Job: json.RawMessage(`{"kind":"k"}`), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		NextRunAt: time.Date(2026, 1, 2, 3, 6, 0, 0, time.UTC), LastJobID: "s:1767323100000",
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"every_ms":90000`, `"misfire":"run_once"`, `"max_catch_up":7`, `"job":{"kind":"k"}`, `"next_run_at":"2026-01-02T03:06:00Z"`} {
		if !strings.Contains(string(data), field) {
			t.Fatalf("%s lacks %s", data, field)
		}
	}
	for _, absent := range []string{`"cron"`, `"timezone"`, `"last_run_at"`} {
		if strings.Contains(string(data), absent) {
			t.Fatalf("%s holds %s, which has no value", data, absent)
		}
	}
	var out client.Schedule
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.Every != in.Every || out.Misfire != in.Misfire || out.MaxCatchUp != 7 || string(out.Job) != `{"kind":"k"}` ||
		!out.CreatedAt.Equal(in.CreatedAt) || !out.NextRunAt.Equal(in.NextRunAt) || !out.LastRunAt.IsZero() || out.LastJobID != in.LastJobID {
		t.Fatalf("round trip: %+v", out)
	}
}
