package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func scheduleTests() []group {
	return []group{{"Schedules", []test{
		{"UpsertCreatesThenRedefines", testScheduleUpsert},
		{"GetListAndDelete", testScheduleGetListDelete},
		{"PauseAndResume", testSchedulePause},
		{"FireInsertsAndRecordsAtomically", testScheduleFire},
		{"FireOfAMovedScheduleChangesNothing", testScheduleFireMoved},
		{"FailedFireChangesNothing", testScheduleFireFails},
		{"ManualFireKeepsTheTicks", testScheduleFireManual},
		{"OneTickFiresOnceUnderRacingFires", testScheduleFireRace},
		{"DueListsUnpausedSchedulesInTimeOrder", testScheduleDue},
		{"FiresJobsAtEveryLevel", testScheduleLevels},
		{"ExactUpsertKeepsEveryField", testScheduleExact},
		{"FiredJobsWithGroupsGoRoundRobin", testScheduleFireGroups},
	}}, {"ScheduleFireMany", []test{
		{"FiresEachOrLeavesItMoved", testScheduleFireMany},
		{"FailedFireManyChangesNothing", testScheduleFireManyFails},
		{"OneTickFiresOnceUnderRacingFires", testScheduleFireManyRace},
		{"FiresJobsAtEveryLevel", testScheduleFireManyLevels},
		{"ASecondFiringOfOneScheduleIsMoved", testScheduleFireManyTwice},
	}}}
}

// newSchedule is a schedule definition named name firing every minute,
// starting at t0.
func newSchedule(name string) job.Schedule {
	return job.Schedule{
		Name: name, Cron: "*/1 * * * *", Timezone: "Europe/Berlin", Misfire: "catch_up", MaxCatchUp: 7,
		Job:      []byte(`{"queue":"cron","kind":"tick", "payload":{"n":1}}`),
		LastTick: t0, NextRunAt: at(time.Minute),
	}
}

// upsert stores def at now and returns the schedule as stored.
func (b *bundle) upsert(def job.Schedule, restart bool, now time.Time) (*job.Schedule, bool) {
	b.t.Helper()
	s, created, err := b.s.ScheduleUpsert(b.ctx, &store.ScheduleUpsertParams{Schedule: def, Restart: restart, Now: now})
	if err != nil {
		b.t.Fatalf("upsert schedule %s: %v", def.Name, err)
	}
	return s, created
}

// getSchedule reads a schedule, which must exist.
func (b *bundle) getSchedule(name string) *job.Schedule {
	b.t.Helper()
	s, err := b.s.ScheduleGet(b.ctx, name)
	if err != nil {
		b.t.Fatalf("get schedule %s: %v", name, err)
	}
	return s
}

// diffSchedule lists the fields in which got differs from want, or "".
func diffSchedule(got, want *job.Schedule) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s %v, want %v", field, g, w)) }
	if got.Name != want.Name || got.Cron != want.Cron || got.Timezone != want.Timezone || got.Every != want.Every {
		add("timing", []any{got.Name, got.Cron, got.Timezone, got.Every}, []any{want.Name, want.Cron, want.Timezone, want.Every})
	}
	if got.Misfire != want.Misfire || got.MaxCatchUp != want.MaxCatchUp || got.Paused != want.Paused {
		add("policy", []any{got.Misfire, got.MaxCatchUp, got.Paused}, []any{want.Misfire, want.MaxCatchUp, want.Paused})
	}
	if string(got.Job) != string(want.Job) {
		add("Job", string(got.Job), string(want.Job))
	}
	for _, t := range []struct {
		name string
		g, w time.Time
	}{{"CreatedAt", got.CreatedAt, want.CreatedAt}, {"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
		{"LastTick", got.LastTick, want.LastTick}, {"LastRunAt", got.LastRunAt, want.LastRunAt},
		{"NextRunAt", got.NextRunAt, want.NextRunAt}} {
		if !t.g.Equal(t.w) {
			add(t.name, t.g, t.w)
		}
	}
	if got.LastJobID != want.LastJobID {
		add("LastJobID", got.LastJobID, want.LastJobID)
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprint(d)
}

// A new schedule is stored as given, its job template byte for byte; a
// second upsert redefines it, keeping how far it fired unless told to
// restart. Schedules survive a restart.
func testScheduleUpsert(b *bundle) {
	def := newSchedule("nightly")
	got, created := b.upsert(def, false, at(time.Second))
	want := def
	want.CreatedAt, want.UpdatedAt = at(time.Second), at(time.Second)
	if !created {
		b.t.Fatal("a new schedule was not reported created")
	}
	if d := diffSchedule(got, &want); d != "" {
		b.t.Fatalf("stored schedule: %s", d)
	}
	if d := diffSchedule(b.getSchedule("nightly"), &want); d != "" {
		b.t.Fatalf("read schedule: %s", d)
	}

	redef := def
	redef.Cron, redef.Timezone, redef.Every, redef.Misfire, redef.MaxCatchUp = "", "", 90*time.Second, "skip", 1
	redef.Job, redef.LastTick, redef.NextRunAt = []byte(`{"kind":"other"}`), at(time.Hour), at(2*time.Minute)
	got, created = b.upsert(redef, false, at(2*time.Second))
	want = redef
	want.CreatedAt, want.UpdatedAt, want.LastTick = at(time.Second), at(2*time.Second), t0
	if created {
		b.t.Fatal("a redefined schedule was reported created")
	}
	if d := diffSchedule(got, &want); d != "" {
		b.t.Fatalf("redefined schedule: %s", d)
	}
	got, _ = b.upsert(redef, true, at(3*time.Second))
	want.LastTick, want.UpdatedAt = at(time.Hour), at(3*time.Second)
	if d := diffSchedule(got, &want); d != "" {
		b.t.Fatalf("restarted schedule: %s", d)
	}
	if b.h.Reopen != nil {
		b.reopen()
		if d := diffSchedule(b.getSchedule("nightly"), &want); d != "" {
			b.t.Fatalf("schedule after a restart: %s", d)
		}
	}
}

// Unknown schedules are not found; the list is sorted by name; a deleted
// schedule is gone but the jobs it enqueued stay.
func testScheduleGetListDelete(b *bundle) {
	_, err := b.s.ScheduleGet(b.ctx, "nosuch")
	b.wantErr("get an unknown schedule", err, job.ErrNotFound)
	b.wantErr("delete an unknown schedule", b.s.ScheduleDelete(b.ctx, "nosuch"), job.ErrNotFound)
	list, err := b.s.ScheduleList(b.ctx)
	if err != nil || len(list) != 0 {
		b.t.Fatalf("schedules of an empty store: %v, %v", list, err)
	}
	for _, name := range []string{"m", "B", "a", "z-1", "z.0"} {
		b.upsert(newSchedule(name), false, t0)
	}
	list, err = b.s.ScheduleList(b.ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"B", "a", "m", "z-1", "z.0"}) {
		b.t.Fatalf("schedules %v, want them sorted by name (bytes)", names)
	}
	p := newJob("cron")
	if _, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "m", Last: t0, Handled: at(time.Minute),
		Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{p}, Now: at(time.Minute)}); err != nil {
		b.t.Fatal(err)
	}
	if err := b.s.ScheduleDelete(b.ctx, "m"); err != nil {
		b.t.Fatal(err)
	}
	_, err = b.s.ScheduleGet(b.ctx, "m")
	b.wantErr("get a deleted schedule", err, job.ErrNotFound)
	if j := b.get(p.ID); j.State != job.StateAvailable {
		b.t.Fatalf("job of a deleted schedule: %s", j.State)
	}
}

// Pausing and resuming stamp UpdatedAt and keep everything else; a paused
// schedule is never due.
func testSchedulePause(b *bundle) {
	_, err := b.s.ScheduleSetPaused(b.ctx, "nosuch", true, t0)
	b.wantErr("pause an unknown schedule", err, job.ErrNotFound)
	created, _ := b.upsert(newSchedule("s"), false, t0)
	got, err := b.s.ScheduleSetPaused(b.ctx, "s", true, at(time.Second))
	if err != nil {
		b.t.Fatal(err)
	}
	want := *created
	want.Paused, want.UpdatedAt = true, at(time.Second)
	if d := diffSchedule(got, &want); d != "" {
		b.t.Fatalf("paused schedule: %s", d)
	}
	if due, next, err := b.s.ScheduleDue(b.ctx, at(time.Hour), 10); err != nil || len(due) != 0 || !next.IsZero() {
		b.t.Fatalf("due with the only schedule paused: %v, %v, %v", due, next, err)
	}
	got, err = b.s.ScheduleSetPaused(b.ctx, "s", false, at(2*time.Second))
	want.Paused, want.UpdatedAt = false, at(2*time.Second)
	if err != nil || diffSchedule(got, &want) != "" {
		b.t.Fatalf("resumed schedule: %v %s", err, diffSchedule(got, &want))
	}
}

// A firing inserts its jobs as JobInsertMany would and records the tick,
// the next one, when it ran and its last job; one with no jobs (ticks
// skipped) moves the tick only.
func testScheduleFire(b *bundle) {
	b.upsert(newSchedule("s"), false, t0)
	jobs := []store.JobInsertParams{newJob("cron"), newJob("cron")}
	res, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: t0, Handled: at(2 * time.Minute),
		Next: at(3 * time.Minute), Jobs: jobs, Now: at(2*time.Minute + time.Second)})
	if err != nil {
		b.t.Fatal(err)
	}
	if len(res) != 2 || res[0].Duplicate || res[1].Job.ID != jobs[1].ID {
		b.t.Fatalf("fire results %+v", res)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 2})
	got := b.getSchedule("s")
	if !got.LastTick.Equal(at(2*time.Minute)) || !got.NextRunAt.Equal(at(3*time.Minute)) ||
		!got.LastRunAt.Equal(at(2*time.Minute+time.Second)) || got.LastJobID != jobs[1].ID {
		b.t.Fatalf("schedule after firing: %+v", got)
	}
	// A tick fired again (by a node that read it before) is a duplicate.
	again, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: at(2 * time.Minute),
		Handled: at(3 * time.Minute), Next: at(4 * time.Minute), Jobs: []store.JobInsertParams{jobs[1]}, Now: at(3 * time.Minute)})
	if err != nil || !again[0].Duplicate {
		b.t.Fatalf("fire of a job id already there: %+v, %v", again, err)
	}
	if _, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: at(3 * time.Minute),
		Handled: at(5 * time.Minute), Next: at(6 * time.Minute), Now: at(5 * time.Minute)}); err != nil {
		b.t.Fatal(err)
	}
	got = b.getSchedule("s")
	if !got.LastTick.Equal(at(5*time.Minute)) || !got.NextRunAt.Equal(at(6*time.Minute)) || !got.LastRunAt.Equal(at(3*time.Minute)) {
		b.t.Fatalf("schedule after skipping ticks: %+v", got)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 2})
}

// A firing from a stale read (the tick moved), of a paused schedule or
// of a deleted one is ErrScheduleMoved and inserts nothing.
func testScheduleFireMoved(b *bundle) {
	b.upsert(newSchedule("s"), false, t0)
	fire := func(last time.Time) error {
		_, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: last, Handled: at(time.Hour),
			Next: at(2 * time.Hour), Jobs: []store.JobInsertParams{newJob("cron")}, Now: at(time.Hour)})
		return err
	}
	b.wantErr("fire from a stale tick", fire(at(-time.Minute)), store.ErrScheduleMoved)
	if _, err := b.s.ScheduleSetPaused(b.ctx, "s", true, t0); err != nil {
		b.t.Fatal(err)
	}
	b.wantErr("fire of a paused schedule", fire(t0), store.ErrScheduleMoved)
	if err := b.s.ScheduleDelete(b.ctx, "s"); err != nil {
		b.t.Fatal(err)
	}
	b.wantErr("fire of a deleted schedule", fire(t0), store.ErrScheduleMoved)
	if _, err := b.s.QueueGet(b.ctx, "cron"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("refused firings made queue cron: %v", err)
	}
}

// A firing whose insert fails records nothing.
func testScheduleFireFails(b *bundle) {
	before, _ := b.upsert(newSchedule("s"), false, t0)
	bad := newJob("cron", func(p *store.JobInsertParams) { p.State = job.StateCompleted })
	_, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: t0, Handled: at(time.Minute),
		Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{newJob("cron"), bad}, Now: at(time.Minute)})
	if err == nil {
		b.t.Fatal("a firing with a job in state completed was accepted")
	}
	if d := diffSchedule(b.getSchedule("s"), before); d != "" {
		b.t.Fatalf("a failed firing changed the schedule: %s", d)
	}
	if _, err := b.s.QueueGet(b.ctx, "cron"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("a failed firing left queue cron: %v", err)
	}
}

// A firing by hand enqueues whatever the schedule's tick and pause, keeps
// its ticks and records the run; of an unknown schedule it is not found.
func testScheduleFireManual(b *bundle) {
	b.upsert(newSchedule("s"), false, t0)
	if _, err := b.s.ScheduleSetPaused(b.ctx, "s", true, t0); err != nil {
		b.t.Fatal(err)
	}
	p := newJob("cron")
	if _, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Manual: true, Last: at(-time.Hour),
		Jobs: []store.JobInsertParams{p}, Now: at(time.Second)}); err != nil {
		b.t.Fatal(err)
	}
	got := b.getSchedule("s")
	if !got.LastTick.Equal(t0) || !got.NextRunAt.Equal(at(time.Minute)) || got.LastJobID != p.ID || !got.LastRunAt.Equal(at(time.Second)) {
		b.t.Fatalf("schedule after a manual firing: %+v", got)
	}
	_, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "nosuch", Manual: true, Jobs: []store.JobInsertParams{newJob("cron")}, Now: t0})
	b.wantErr("manual firing of an unknown schedule", err, job.ErrNotFound)
}

// Many firings of one tick at once (several nodes that read the same
// schedule) succeed once; the others are ErrScheduleMoved and insert
// nothing.
func testScheduleFireRace(b *bundle) {
	b.upsert(newSchedule("s"), false, t0)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "s", Last: t0, Handled: at(time.Minute),
				Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{newJob("cron")}, Now: at(time.Minute)})
		}()
	}
	wg.Wait()
	fired := 0
	for _, err := range errs {
		switch {
		case err == nil:
			fired++
		case !errors.Is(err, store.ErrScheduleMoved):
			b.t.Fatalf("racing firing: %v", err)
		}
	}
	if fired != 1 {
		b.t.Fatalf("%d firings of one tick succeeded, want 1", fired)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 1})
}

// Due lists the unpaused schedules whose next tick is not after now,
// earliest first and up to the limit, and the next tick of the rest.
func testScheduleDue(b *bundle) {
	for i, name := range []string{"c", "a", "b", "later", "paused", "never"} {
		def := newSchedule(name)
		def.NextRunAt = at(time.Duration(i) * time.Minute)
		switch name {
		case "later":
			def.NextRunAt = at(time.Hour)
		case "never":
			def.NextRunAt = time.Time{}
		case "paused":
			def.NextRunAt, def.Paused = at(-time.Hour), true
		}
		b.upsert(def, false, t0)
	}
	due, next, err := b.s.ScheduleDue(b.ctx, at(2*time.Minute), 10)
	if err != nil {
		b.t.Fatal(err)
	}
	var names []string
	for _, s := range due {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"c", "a", "b"}) || !next.Equal(at(time.Hour)) {
		b.t.Fatalf("due %v next %v, want c, a, b and %v", names, next, at(time.Hour))
	}
	if due, _, err := b.s.ScheduleDue(b.ctx, at(2*time.Minute), 2); err != nil || len(due) != 2 || due[1].Name != "a" {
		b.t.Fatalf("due with limit 2: %v, %v", due, err)
	}
}

// A schedule fires jobs of every level the store keeps.
func testScheduleLevels(b *bundle) {
	for i, d := range b.h.durabilities() {
		name := "s-" + string(d)
		b.upsert(newSchedule(name), false, t0)
		p := newJob("cron-"+string(d), func(p *store.JobInsertParams) { p.Durability = d })
		res, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: name, Last: t0, Handled: at(time.Minute),
			Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{p}, Now: at(time.Duration(i) * time.Second)})
		if err != nil || len(res) != 1 || res[0].Duplicate {
			b.t.Fatalf("fire a %s job: %+v, %v", d, res, err)
		}
		if got := b.get(p.ID); got.Durability != d {
			b.t.Fatalf("fired job kept as %s, want %s", got.Durability, d)
		}
		if s := b.getSchedule(name); s.LastJobID != p.ID || !s.LastTick.Equal(at(time.Minute)) {
			b.t.Fatalf("schedule after firing a %s job: %+v", d, s)
		}
	}
}

// An exact upsert (a copy between stores) keeps every field as given,
// over an existing schedule too.
func testScheduleExact(b *bundle) {
	def := newSchedule("copied")
	def.Paused, def.CreatedAt, def.UpdatedAt = true, at(-time.Hour), at(-time.Minute)
	def.LastTick, def.LastRunAt, def.LastJobID, def.NextRunAt = at(-2*time.Minute), at(-2*time.Minute+time.Second), "copied:1", at(-time.Minute)
	for _, existing := range []bool{false, true} {
		got, created, err := b.s.ScheduleUpsert(b.ctx, &store.ScheduleUpsertParams{Schedule: def, Exact: true, Now: at(time.Hour)})
		if err != nil || created == existing {
			b.t.Fatalf("exact upsert (existing %v): created %v, %v", existing, created, err)
		}
		if d := diffSchedule(got, &def); d != "" {
			b.t.Fatalf("exact upsert (existing %v): %s", existing, d)
		}
		if d := diffSchedule(b.getSchedule("copied"), &def); d != "" {
			b.t.Fatalf("exact upsert read back (existing %v): %s", existing, d)
		}
	}
}

// fireMany fires fires with ScheduleFireMany, which must succeed.
func (b *bundle) fireMany(fires ...*store.ScheduleFireParams) []store.ScheduleFireResult {
	b.t.Helper()
	res, err := b.s.ScheduleFireMany(b.ctx, fires)
	if err != nil {
		b.t.Fatalf("fire %d schedules: %v", len(fires), err)
	}
	if len(res) != len(fires) {
		b.t.Fatalf("fire %d schedules: %d results", len(fires), len(res))
	}
	return res
}

// One call fires several schedules, each as ScheduleFire would: their
// jobs inserted, their ticks and runs recorded, a tick fired again a
// duplicate. Those not where the caller saw them (a stale tick, a paused
// or unknown schedule) are reported moved and change nothing.
func testScheduleFireMany(b *bundle) {
	for _, name := range []string{"a", "b", "c", "stale", "paused"} {
		b.upsert(newSchedule(name), false, t0)
	}
	if _, err := b.s.ScheduleSetPaused(b.ctx, "paused", true, t0); err != nil {
		b.t.Fatal(err)
	}
	now := at(2*time.Minute + time.Second)
	fire := func(name string, last time.Time, jobs ...store.JobInsertParams) *store.ScheduleFireParams {
		return &store.ScheduleFireParams{Name: name, Last: last, Handled: at(2 * time.Minute), Next: at(3 * time.Minute), Jobs: jobs, Now: now}
	}
	a := []store.JobInsertParams{newJob("cron"), newJob("cron")}
	c := newJob("other")
	res := b.fireMany(fire("a", t0, a...), fire("stale", at(-time.Minute), newJob("cron")), fire("b", t0),
		fire("nosuch", t0, newJob("cron")), fire("c", t0, c), fire("paused", t0, newJob("cron")))
	for i, moved := range []bool{false, true, false, true, false, true} {
		if res[i].Moved != moved {
			b.t.Fatalf("result %d: moved %v, want %v (%+v)", i, res[i].Moved, moved, res)
		}
	}
	if len(res[0].Jobs) != 2 || res[0].Jobs[1].Job.ID != a[1].ID || res[0].Jobs[0].Duplicate || len(res[2].Jobs) != 0 ||
		len(res[4].Jobs) != 1 || res[4].Jobs[0].Job.ID != c.ID || res[4].Jobs[0].Job.Queue != "other" {
		b.t.Fatalf("fire results %+v", res)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 2})
	b.wantCounts("other", map[job.State]int64{job.StateAvailable: 1})
	for name, lastJob := range map[string]string{"a": a[1].ID, "b": "", "c": c.ID} {
		got := b.getSchedule(name)
		if !got.LastTick.Equal(at(2*time.Minute)) || !got.NextRunAt.Equal(at(3*time.Minute)) || got.LastJobID != lastJob ||
			(lastJob != "") != got.LastRunAt.Equal(now) {
			b.t.Fatalf("schedule %s after firing: %+v", name, got)
		}
	}
	for _, name := range []string{"stale", "paused"} {
		if got := b.getSchedule(name); !got.LastTick.Equal(t0) || got.LastJobID != "" {
			b.t.Fatalf("moved schedule %s changed: %+v", name, got)
		}
	}
	// A tick fired again (by a node that read it before) is a duplicate.
	again := b.fireMany(fire("stale", t0, a[0]))
	if again[0].Moved || len(again[0].Jobs) != 1 || !again[0].Jobs[0].Duplicate || again[0].Jobs[0].Job.ID != a[0].ID {
		b.t.Fatalf("fire of a job id already there: %+v", again)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 2})
}

// A call in which one firing fails fires none of its schedules.
func testScheduleFireManyFails(b *bundle) {
	before := map[string]*job.Schedule{}
	for _, name := range []string{"a", "b"} {
		before[name], _ = b.upsert(newSchedule(name), false, t0)
	}
	bad := newJob("cron", func(p *store.JobInsertParams) { p.State = job.StateCompleted })
	_, err := b.s.ScheduleFireMany(b.ctx, []*store.ScheduleFireParams{
		{Name: "a", Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{newJob("cron")}, Now: at(time.Minute)},
		{Name: "b", Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute), Jobs: []store.JobInsertParams{newJob("cron"), bad}, Now: at(time.Minute)},
	})
	if err == nil {
		b.t.Fatal("a firing with a job in state completed was accepted")
	}
	for name, s := range before {
		if d := diffSchedule(b.getSchedule(name), s); d != "" {
			b.t.Fatalf("a failed firing changed schedule %s: %s", name, d)
		}
	}
	if _, err := b.s.QueueGet(b.ctx, "cron"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("a failed firing left queue cron: %v", err)
	}
}

// Many calls firing the same ticks of the same schedules at once (several
// nodes that read them) fire each schedule once.
func testScheduleFireManyRace(b *bundle) {
	names := []string{"a", "b", "c"}
	for _, name := range names {
		b.upsert(newSchedule(name), false, t0)
	}
	const n = 8
	var wg sync.WaitGroup
	results := make([][]store.ScheduleFireResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fires := make([]*store.ScheduleFireParams, len(names))
			for k, name := range names {
				// Each caller lists them in another order.
				name = names[(k+i)%len(names)]
				fires[k] = &store.ScheduleFireParams{Name: name, Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute),
					Jobs: []store.JobInsertParams{newJob("cron")}, Now: at(time.Minute)}
			}
			results[i], errs[i] = b.s.ScheduleFireMany(b.ctx, fires)
		}()
	}
	wg.Wait()
	fired := 0
	for i, err := range errs {
		if err != nil {
			b.t.Fatalf("racing firing: %v", err)
		}
		for _, r := range results[i] {
			if !r.Moved {
				fired++
			}
		}
	}
	if fired != len(names) {
		b.t.Fatalf("%d firings of %d schedules' one tick succeeded, want one each", fired, len(names))
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: int64(len(names))})
}

// A call that fires one schedule twice fires it as two calls in a row
// would: the second firing, made from the tick the first moved on, is
// moved and inserts nothing.
func testScheduleFireManyTwice(b *bundle) {
	b.upsert(newSchedule("a"), false, t0)
	first, second := newJob("cron"), newJob("cron")
	fire := func(handled time.Duration, j store.JobInsertParams) *store.ScheduleFireParams {
		return &store.ScheduleFireParams{Name: "a", Last: t0, Handled: at(handled), Next: at(handled + time.Minute),
			Jobs: []store.JobInsertParams{j}, Now: at(time.Minute)}
	}
	res := b.fireMany(fire(time.Minute, first), fire(2*time.Minute, second))
	if res[0].Moved || !res[1].Moved || len(res[1].Jobs) != 0 {
		b.t.Fatalf("one schedule fired twice in a call: %+v", res)
	}
	b.wantCounts("cron", map[job.State]int64{job.StateAvailable: 1})
	if got := b.getSchedule("a"); !got.LastTick.Equal(at(time.Minute)) || got.LastJobID != first.ID {
		b.t.Fatalf("schedule after two firings in one call: %+v", got)
	}
}

// One call fires the jobs of every level the store keeps.
func testScheduleFireManyLevels(b *bundle) {
	var fires []*store.ScheduleFireParams
	for _, d := range b.h.durabilities() {
		name := "s-" + string(d)
		b.upsert(newSchedule(name), false, t0)
		fires = append(fires, &store.ScheduleFireParams{Name: name, Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute),
			Jobs: newJobs("cron-"+string(d), 2, func(p *store.JobInsertParams) { p.Durability = d }), Now: at(time.Minute)})
	}
	res := b.fireMany(fires...)
	for i, f := range fires {
		d := f.Jobs[0].Durability
		if res[i].Moved || len(res[i].Jobs) != 2 || res[i].Jobs[1].Job.ID != f.Jobs[1].ID || res[i].Jobs[0].Duplicate {
			b.t.Fatalf("fire %s jobs: %+v", d, res[i])
		}
		for _, jp := range f.Jobs {
			if got := b.get(jp.ID); got.Durability != d {
				b.t.Fatalf("fired job kept as %s, want %s", got.Durability, d)
			}
		}
		if s := b.getSchedule(f.Name); s.LastJobID != f.Jobs[1].ID || !s.LastTick.Equal(at(time.Minute)) {
			b.t.Fatalf("schedule after firing %s jobs: %+v", d, s)
		}
	}
	// Fired again, each is a duplicate of the job there.
	for _, f := range fires {
		f.Last, f.Handled = at(time.Minute), at(2*time.Minute)
	}
	for i, r := range b.fireMany(fires...) {
		if r.Moved || len(r.Jobs) != 2 || !r.Jobs[0].Duplicate || !r.Jobs[1].Duplicate {
			b.t.Fatalf("fire %s jobs again: %+v", fires[i].Jobs[0].Durability, r)
		}
	}
}

// Jobs with a group that a firing inserts make their queue hand out its
// jobs round-robin over the groups, as inserted jobs do, whether one
// schedule fires or many.
func testScheduleFireGroups(b *bundle) {
	for _, name := range []string{"one", "many-x", "many-y"} {
		b.upsert(newSchedule(name), false, t0)
	}
	inGroup := func(g string) func(*store.JobInsertParams) { return func(p *store.JobInsertParams) { p.Group = g } }
	if _, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "one", Last: t0, Handled: at(time.Minute),
		Next: at(2 * time.Minute), Jobs: newJobs("single", 3, inGroup("x")), Now: at(time.Minute)}); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.s.ScheduleFire(b.ctx, &store.ScheduleFireParams{Name: "one", Last: at(time.Minute), Handled: at(2 * time.Minute),
		Next: at(3 * time.Minute), Jobs: newJobs("single", 1, inGroup("y")), Now: at(2 * time.Minute)}); err != nil {
		b.t.Fatal(err)
	}
	b.fireMany(&store.ScheduleFireParams{Name: "many-x", Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute),
		Jobs: newJobs("batch", 3, inGroup("x")), Now: at(time.Minute)},
		&store.ScheduleFireParams{Name: "many-y", Last: t0, Handled: at(time.Minute), Next: at(2 * time.Minute),
			Jobs: newJobs("batch", 1, inGroup("y")), Now: at(time.Minute)})
	for _, q := range []string{"single", "batch"} {
		var got []string
		for range 2 {
			js := b.claimAt(at(3*time.Minute), 1, q)
			if len(js) != 1 {
				b.t.Fatalf("claim of queue %s: %d jobs", q, len(js))
			}
			got = append(got, js[0].Group)
		}
		if slices.Sort(got); !slices.Equal(got, []string{"x", "y"}) {
			b.t.Fatalf("queue %s handed out groups %v one at a time, want x and y (round-robin)", q, got)
		}
	}
}
