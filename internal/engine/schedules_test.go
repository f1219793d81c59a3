package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// decodeTemplate reads the few template fields these tests use.
func decodeTemplate(raw json.RawMessage) (EnqueueRequest, error) {
	var t struct {
		ID, Queue, Kind string
		Payload         json.RawMessage
		RunAt           *time.Time `json:"run_at"`
		DelayMS         int64      `json:"delay_ms"`
		Durability      job.Durability
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return EnqueueRequest{}, job.Invalid("job", "not JSON: %v", err)
	}
	req := EnqueueRequest{ID: t.ID, Queue: t.Queue, Kind: t.Kind, Payload: t.Payload, Delay: time.Duration(t.DelayMS) * time.Millisecond, Durability: t.Durability}
	if t.RunAt != nil {
		req.RunAt = *t.RunAt
	}
	return req, nil
}

// t0 is a whole hour, so that every-minute ticks fall on t0 + k minutes.
var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

type cronBundle struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	e     *Engine
	clock *clock
}

func setupCron(t *testing.T) *cronBundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := &clock{now: t0}
	return &cronBundle{t: t, ctx: context.Background(), st: st, clock: c, e: New(st, Config{Clock: c, DecodeJob: decodeTemplate})}
}

func (b *cronBundle) put(req ScheduleRequest) *job.Schedule {
	b.t.Helper()
	if req.Job == nil {
		req.Job = json.RawMessage(`{"queue":"cron","kind":"tick"}`)
	}
	s, _, err := b.e.PutSchedule(b.ctx, req)
	if err != nil {
		b.t.Fatalf("put schedule %s: %v", req.Name, err)
	}
	return s
}

// fireAt fires the schedules due at minute m after t0 and returns the
// ids of the jobs in queue cron, oldest first.
func (b *cronBundle) fireAt(m float64) []string {
	b.t.Helper()
	b.tallyAt(m)
	return b.jobs()
}

// tallyAt fires the schedules due at minute m after t0 and returns the
// tally of the ticks it handled.
func (b *cronBundle) tallyAt(m float64) schedule.Tally {
	b.t.Helper()
	now := t0.Add(time.Duration(m * float64(time.Minute)))
	b.clock.set(now)
	_, tally, err := b.e.FireSchedules(b.ctx, now)
	if err != nil {
		b.t.Fatalf("fire at minute %v: %v", m, err)
	}
	return tally
}

func (b *cronBundle) jobs() []string {
	b.t.Helper()
	page, err := b.st.JobList(b.ctx, &job.ListParams{Queue: "cron", Limit: 1000})
	if err != nil {
		b.t.Fatal(err)
	}
	var ids []string
	for _, j := range page.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// tickIDs are the job ids of schedule name's ticks at the given minutes.
func tickIDs(name string, minutes ...int) []string {
	var out []string
	for _, m := range minutes {
		out = append(out, schedule.JobID(name, t0.Add(time.Duration(m)*time.Minute)))
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPutScheduleRefusesNamingTheField(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	every := schedule.Timing{Every: time.Minute}
	good := json.RawMessage(`{"queue":"cron","kind":"tick"}`)
	for _, c := range []struct {
		name  string
		req   ScheduleRequest
		field string
	}{
		{"bad name", ScheduleRequest{Name: "-x", Timing: every, Job: good}, "name"},
		{"long name", ScheduleRequest{Name: string(make([]byte, 101)), Timing: every, Job: good}, "name"},
		{"no timing", ScheduleRequest{Name: "s", Job: good}, "cron"},
		{"bad cron", ScheduleRequest{Name: "s", Timing: schedule.Timing{Cron: "often"}, Job: good}, "cron"},
		{"bad zone", ScheduleRequest{Name: "s", Timing: schedule.Timing{Cron: "@daily", Timezone: "Nowhere/City"}, Job: good}, "timezone"},
		{"bad misfire", ScheduleRequest{Name: "s", Timing: every, Misfire: "sometimes", Job: good}, "misfire"},
		{"bad catch-up", ScheduleRequest{Name: "s", Timing: every, MaxCatchUp: -1, Job: good}, "max_catch_up"},
		{"no job", ScheduleRequest{Name: "s", Timing: every}, "job"},
		{"job without kind", ScheduleRequest{Name: "s", Timing: every, Job: json.RawMessage(`{"queue":"q"}`)}, "job.kind"},
		{"job with an id", ScheduleRequest{Name: "s", Timing: every, Job: json.RawMessage(`{"kind":"k","id":"x"}`)}, "job.id"},
		{"job with run_at", ScheduleRequest{Name: "s", Timing: every, Job: json.RawMessage(`{"kind":"k","run_at":"2027-01-01T00:00:00Z"}`)}, "job.run_at"},
		{"job with a bad queue", ScheduleRequest{Name: "s", Timing: every, Job: json.RawMessage(`{"kind":"k","queue":"a b"}`)}, "job.queue"},
	} {
		_, _, err := b.e.PutSchedule(b.ctx, c.req)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != c.field {
			t.Errorf("%s: %v, want an input error on %s", c.name, err, c.field)
		}
	}
	if list, err := b.e.ListSchedules(b.ctx); err != nil || len(list) != 0 {
		t.Fatalf("refused puts stored schedules: %v, %v", list, err)
	}
}

// Each tick fires one job, with the tick's id, once however often the
// schedules are fired.
func TestScheduleFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	s := b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: time.Minute}})
	if !s.NextRunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next run %v, want %v", s.NextRunAt, t0.Add(time.Minute))
	}
	if got := b.fireAt(0.5); len(got) != 0 {
		t.Fatalf("before the first tick: %v", got)
	}
	b.fireAt(1)
	b.fireAt(1.2)
	if got := b.fireAt(2.01); !equal(got, tickIDs("m", 1, 2)) {
		t.Fatalf("jobs %v, want the ticks of minutes 1 and 2", got)
	}
	s, err := b.e.GetSchedule(b.ctx, "m")
	if err != nil || !s.LastTick.Equal(t0.Add(2*time.Minute)) || !s.NextRunAt.Equal(t0.Add(3*time.Minute)) || s.LastJobID != tickIDs("m", 2)[0] {
		t.Fatalf("schedule after firing: %+v, %v", s, err)
	}
}

// After ten minutes with nothing firing: catch_up fires every tick (up to
// max_catch_up, the newest), run_once one, skip only the tick still on
// time. The tally counts every tick fired, each of them late, and every
// tick left without a job of its own as skipped.
func TestMisfirePolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		misfire Misfire
		catchUp int
		want    []int
	}{
		{schedule.MisfireCatchUp, 0, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{schedule.MisfireCatchUp, 3, []int{8, 9, 10}},
		{schedule.MisfireRunOnce, 0, []int{10}},
		{schedule.MisfireSkip, 0, []int{10}},
	} {
		b := setupCron(t)
		b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: time.Minute}, Misfire: c.misfire, MaxCatchUp: c.catchUp})
		tally := b.tallyAt(10.5)
		if got := b.jobs(); !equal(got, tickIDs("m", c.want...)) {
			t.Errorf("%s (max %d): jobs %v, want minutes %v", c.misfire, c.catchUp, got, c.want)
		}
		// The oldest tick fired is n minutes and a half old, less a minute.
		n := len(c.want)
		if tally.Fired != n || tally.Late != n || tally.MostLate != time.Duration(n)*time.Minute-30*time.Second || tally.Skipped != 10-n {
			t.Errorf("%s (max %d): tally %+v, want %d fired, all late, and %d skipped", c.misfire, c.catchUp, tally, n, 10-n)
		}
	}
	// skip, with the newest tick past the grace: nothing, and the tick
	// counts as skipped.
	b := setupCron(t)
	b.put(ScheduleRequest{Name: "h", Timing: schedule.Timing{Every: time.Hour}})
	tally := b.tallyAt(62)
	if got := b.jobs(); len(got) != 0 {
		t.Fatalf("skip, the only tick two minutes late: %v", got)
	}
	if tally.Fired != 0 || tally.Skipped != 1 || tally.SkippedNames[0] != "h" {
		t.Fatalf("skip, the only tick two minutes late: tally %+v", tally)
	}
	// On time, nothing is late or skipped.
	if tally := b.tallyAt(120); tally.Fired != 1 || tally.Late != 0 || tally.Skipped != 0 {
		t.Fatalf("a tick on time: tally %+v", tally)
	}
}

// Misfire is the policy type of these tests.
type Misfire = schedule.Misfire

// Ticks that pass while a schedule is paused are missed ticks when it
// resumes; a trigger fires now whatever the pause and moves no tick.
func TestPauseResumeAndTrigger(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: time.Minute}, Misfire: schedule.MisfireCatchUp})
	b.fireAt(1)
	if _, err := b.e.PauseSchedule(b.ctx, "m", true); err != nil {
		t.Fatal(err)
	}
	if got := b.fireAt(4.5); !equal(got, tickIDs("m", 1)) {
		t.Fatalf("paused: jobs %v", got)
	}
	fired, err := b.e.TriggerSchedule(b.ctx, "m")
	if err != nil || fired.Job.Duplicate || fired.Schedule.LastJobID != fired.Job.ID || !fired.Schedule.Paused {
		t.Fatalf("trigger: %+v, %v", fired, err)
	}
	if _, err := b.e.PauseSchedule(b.ctx, "m", false); err != nil {
		t.Fatal(err)
	}
	got := b.fireAt(5)
	want := append(tickIDs("m", 1), fired.Job.ID)
	want = append(want, tickIDs("m", 2, 3, 4, 5)...)
	if !equal(got, want) {
		t.Fatalf("after resuming: %v, want %v", got, want)
	}
	_, err = b.e.TriggerSchedule(b.ctx, "nosuch")
	if !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("trigger of an unknown schedule: %v", err)
	}
}

// A schedule whose timing changes starts again at the change: the ticks
// of the new timing before it are not missed. One whose job changes
// keeps its ticks.
func TestRedefiningTheTimingRestarts(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: time.Minute}, Misfire: schedule.MisfireCatchUp})
	b.fireAt(1)
	b.clock.set(t0.Add(5*time.Minute + 30*time.Second))
	b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: time.Minute}, Misfire: schedule.MisfireCatchUp,
		Job: json.RawMessage(`{"queue":"cron","kind":"other"}`)})
	if got := b.fireAt(5.5); !equal(got, tickIDs("m", 1, 2, 3, 4, 5)) {
		t.Fatalf("after a new job template: %v", got)
	}
	b.clock.set(t0.Add(8*time.Minute + 30*time.Second))
	s := b.put(ScheduleRequest{Name: "m", Timing: schedule.Timing{Every: 2 * time.Minute}, Misfire: schedule.MisfireCatchUp})
	if !s.NextRunAt.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("next run after a new timing: %v", s.NextRunAt)
	}
	if got := b.fireAt(10); !equal(got, tickIDs("m", 1, 2, 3, 4, 5, 10)) {
		t.Fatalf("after a new timing: %v", got)
	}
}

// Two engines on one store (two nodes that both believe they lead)
// firing at once fire each tick once.
func TestRacingFiresFireEachTickOnce(t *testing.T) {
	t.Parallel()
	b := setupCron(t)
	other := New(b.st, Config{Clock: b.clock, DecodeJob: decodeTemplate})
	for i := range 5 {
		b.put(ScheduleRequest{Name: string(rune('a' + i)), Timing: schedule.Timing{Every: time.Minute}, Misfire: schedule.MisfireCatchUp})
	}
	for m := 1; m <= 10; m++ {
		now := t0.Add(time.Duration(m) * time.Minute)
		b.clock.set(now)
		var wg sync.WaitGroup
		for _, e := range []*Engine{b.e, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := e.FireSchedules(b.ctx, now); err != nil {
					t.Errorf("fire: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	if got := b.jobs(); len(got) != 50 {
		t.Fatalf("%d jobs for 5 schedules × 10 ticks", len(got))
	}
}
