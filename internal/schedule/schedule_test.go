package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func mustParse(t *testing.T, tm Timing) Timetable {
	t.Helper()
	tt, err := Parse(tm)
	if err != nil {
		t.Fatalf("parse %v: %v", tm, err)
	}
	return tt
}

// ticks lists the ticks of tt in (from, to].
func ticks(tt Timetable, from, to time.Time) []time.Time {
	var out []time.Time
	for t := tt.Next(from); !t.IsZero() && !t.After(to); t = tt.Next(t) {
		out = append(out, t)
	}
	return out
}

func TestParseRefusesWithTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		in    Timing
		field string
	}{
		{"nothing", Timing{}, "cron"},
		{"both", Timing{Cron: "* * * * *", Every: time.Minute}, "every_ms"},
		{"garbage", Timing{Cron: "every day"}, "cron"},
		{"too many fields", Timing{Cron: "0 0 0 * * * *"}, "cron"},
		{"minute 61", Timing{Cron: "61 * * * *"}, "cron"},
		{"never", Timing{Cron: "0 0 30 2 *"}, "cron"},
		{"@every", Timing{Cron: "@every 5m"}, "cron"},
		{"zone inside", Timing{Cron: "TZ=Europe/Berlin 0 9 * * *"}, "cron"},
		{"hash", Timing{Cron: "H * * * *"}, "cron"},
		{"unknown zone", Timing{Cron: "0 9 * * *", Timezone: "Mars/Olympus"}, "timezone"},
		{"local zone", Timing{Cron: "0 9 * * *", Timezone: "Local"}, "timezone"},
		{"zone with every", Timing{Every: time.Minute, Timezone: "UTC"}, "timezone"},
		{"every too short", Timing{Every: time.Millisecond}, "every_ms"},
		{"every too long", Timing{Every: 400 * 24 * time.Hour}, "every_ms"},
		{"every negative", Timing{Every: -time.Minute}, "every_ms"},
	} {
		_, err := Parse(c.in)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != c.field {
			t.Errorf("%s: %v, want an input error on %s", c.name, err, c.field)
		}
	}
	for _, ok := range []Timing{
		{Cron: "*/5 * * * *"}, {Cron: "30 */10 * * * *"}, {Cron: "@hourly"}, {Cron: "@daily", Timezone: "Asia/Tokyo"},
		{Cron: "0 9 * * MON-FRI", Timezone: "Europe/Berlin"}, {Cron: "0 0 1 JAN,JUL *"}, {Every: 1500 * time.Millisecond},
	} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

func TestCronTicks(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 24, 10, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		in   Timing
		to   time.Duration
		want []string
	}{
		{Timing{Cron: "*/5 * * * *"}, 10 * time.Minute, []string{"10:10", "10:15"}},
		{Timing{Cron: "@hourly"}, 2 * time.Hour, []string{"11:00", "12:00"}},
		{Timing{Cron: "15 7 * * * *"}, 90 * time.Minute, []string{"10:07:15", "11:07:15"}},
		// 09:00 in Tokyo is 00:00 UTC.
		{Timing{Cron: "0 9 * * *", Timezone: "Asia/Tokyo"}, 24 * time.Hour, []string{"2026-11-25 00:00"}},
	} {
		got := ticks(mustParse(t, c.in), from, from.Add(c.to))
		if len(got) != len(c.want) {
			t.Errorf("%v: %v, want %v", c.in, got, c.want)
			continue
		}
		for i, w := range c.want {
			if !matches(got[i], w) {
				t.Errorf("%v: tick %d is %v, want %s", c.in, i, got[i], w)
			}
		}
	}
}

// matches compares t (UTC) with "15:04", "15:04:05" or "2006-01-02 15:04".
func matches(t time.Time, want string) bool {
	for _, layout := range []string{"15:04", "15:04:05", "2006-01-02 15:04"} {
		if len(layout) == len(want) {
			return t.UTC().Format(layout) == want
		}
	}
	return false
}

// A daily 02:30 in New York fires once on the day the clocks spring
// forward (02:30 does not exist: it fires an hour later on the clock, at
// 03:30) and once on the day they fall back (01:30 happens twice: it
// fires in the first pass); so do the other times of those days.
func TestCronAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day := func(y int, m time.Month, d int) (time.Time, time.Time) {
		start := time.Date(y, m, d, 0, 0, 0, 0, ny)
		return start, start.AddDate(0, 0, 1)
	}
	for _, c := range []struct {
		name     string
		cron     string
		y        int
		m        time.Month
		d        int
		wantWall string
	}{
		{"spring forward, 02:30", "30 2 * * *", 2026, time.March, 8, "03:30"},
		{"spring forward, 02:00", "0 2 * * *", 2026, time.March, 8, "03:00"},
		{"spring forward, 01:30", "30 1 * * *", 2026, time.March, 8, "01:30"},
		{"spring forward, 03:30", "30 3 * * *", 2026, time.March, 8, "03:30"},
		{"fall back, 01:30", "30 1 * * *", 2026, time.November, 1, "01:30"},
		{"fall back, 02:30", "30 2 * * *", 2026, time.November, 1, "02:30"},
		{"plain day", "30 2 * * *", 2026, time.March, 9, "02:30"},
		{"fall back, 00:30", "30 0 * * *", 2026, time.November, 1, "00:30"},
	} {
		tt := mustParse(t, Timing{Cron: c.cron, Timezone: "America/New_York"})
		start, end := day(c.y, c.m, c.d)
		got := ticks(tt, start.Add(-time.Nanosecond), end.Add(-time.Nanosecond))
		if len(got) != 1 {
			t.Errorf("%s: %d ticks %v, want exactly 1", c.name, len(got), got)
			continue
		}
		if wall := got[0].In(ny).Format("15:04"); wall != c.wantWall {
			t.Errorf("%s: fired at %s New York time, want %s", c.name, wall, c.wantWall)
		}
	}
}

func TestEveryTicksFromTheEpoch(t *testing.T) {
	t.Parallel()
	tt := mustParse(t, Timing{Every: 5 * time.Minute})
	from := time.Date(2026, 11, 24, 10, 7, 30, 0, time.UTC)
	got := ticks(tt, from, from.Add(11*time.Minute))
	if len(got) != 2 || !matches(got[0], "10:10") || !matches(got[1], "10:15") {
		t.Fatalf("ticks %v, want 10:10 and 10:15", got)
	}
	if n := tt.Next(got[0]); !n.Equal(got[1]) {
		t.Fatalf("next after a tick: %v, want %v", n, got[1])
	}
}

func TestDue(t *testing.T) {
	t.Parallel()
	tt := mustParse(t, Timing{Every: time.Minute})
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(min float64) time.Time { return base.Add(time.Duration(min * float64(time.Minute))) }
	for _, c := range []struct {
		name      string
		last, now float64
		policy    Misfire
		catchUp   int
		fire      []float64
		handled   float64
		next      float64
		skipped   int
	}{
		{"nothing due", 0, 0.5, MisfireSkip, 10, nil, 0, 1, 0},
		{"on time", 0, 1.01, MisfireSkip, 10, []float64{1}, 1, 2, 0},
		{"exactly at the tick", 0, 1, MisfireSkip, 10, []float64{1}, 1, 2, 0},
		{"skip fires the newest on-time tick", 0, 3.5, MisfireSkip, 10, []float64{3}, 3, 4, 2},
		{"skip drops a tick past the grace", 0, 1 + 1.5, MisfireSkip, 10, []float64{2}, 2, 3, 1},
		{"skip drops everything late", 0.5, 0.9 + 0, MisfireSkip, 10, nil, 0.5, 1, 0},
		{"skip after a day down", 0, 24*60 + 0.5, MisfireSkip, 10, []float64{24 * 60}, 24 * 60, 24*60 + 1, 24*60 - 1},
		{"run_once", 0, 30.5, MisfireRunOnce, 10, []float64{30}, 30, 31, 29},
		{"catch_up", 0, 3.5, MisfireCatchUp, 10, []float64{1, 2, 3}, 3, 4, 0},
		{"catch_up keeps the newest", 0, 30.5, MisfireCatchUp, 3, []float64{28, 29, 30}, 30, 31, 27},
	} {
		f := Due(tt, at(c.last), at(c.now), c.policy, c.catchUp)
		if len(f.Fire) != len(c.fire) {
			t.Errorf("%s: fire %v, want %v", c.name, f.Fire, c.fire)
			continue
		}
		for i := range f.Fire {
			if !f.Fire[i].Equal(at(c.fire[i])) {
				t.Errorf("%s: fire %v, want %v", c.name, f.Fire, c.fire)
			}
		}
		if !f.Handled.Equal(at(c.handled)) || !f.Next.Equal(at(c.next)) {
			t.Errorf("%s: handled %v next %v, want %v and %v", c.name, f.Handled, f.Next, at(c.handled), at(c.next))
		}
		if f.Skipped != c.skipped {
			t.Errorf("%s: %d ticks skipped, want %d", c.name, f.Skipped, c.skipped)
		}
	}
	// Skip, with the newest tick past the grace: nothing fires, but the
	// tick is handled, and skipped.
	hourly := mustParse(t, Timing{Every: time.Hour})
	f := Due(hourly, base, base.Add(time.Hour+Grace+time.Second), MisfireSkip, 10)
	if len(f.Fire) != 0 || !f.Handled.Equal(base.Add(time.Hour)) || !f.Next.Equal(base.Add(2*time.Hour)) || f.Skipped != 1 {
		t.Fatalf("late skip: %+v", f)
	}
	// A cron expression counts the ticks it skips too, up to MaxCounted.
	everySecond := mustParse(t, Timing{Cron: "* * * * * *"})
	if f := Due(everySecond, base, base.Add(90*time.Second), MisfireSkip, 10); len(f.Fire) != 1 || f.Skipped != 89 {
		t.Fatalf("skip of 90 ticks of a cron expression: %+v", f)
	}
	if f := Due(everySecond, base, base.Add(24*time.Hour), MisfireRunOnce, 10); len(f.Fire) != 1 || f.Skipped != MaxCounted {
		t.Fatalf("run_once of a day of ticks every second: %d skipped, want %d", f.Skipped, MaxCounted)
	}
}

// A schedule that ticks every second and was down for a year costs the
// ticks it keeps and those it counts, not every tick of the year.
func TestDueAfterAYearDown(t *testing.T) {
	t.Parallel()
	counted := &counting{Timetable: mustParse(t, Timing{Cron: "* * * * * *"})}
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	f := Due(counted, now.AddDate(-1, 0, 0), now, MisfireCatchUp, 5)
	if len(f.Fire) != 5 || !f.Fire[4].Equal(now) || !f.Handled.Equal(now) || f.Skipped != MaxCounted {
		t.Fatalf("fire %v handled %v skipped %d, want the 5 seconds up to %v and %d", f.Fire, f.Handled, f.Skipped, now, MaxCounted)
	}
	if counted.n > MaxCounted+10_000 {
		t.Fatalf("%d ticks computed for 5 fired", counted.n)
	}
}

// Ticks that fire more than LateAfter after their time count as late;
// skipped ticks count with their schedule; a few schedules are named.
func TestTally(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	var tally Tally
	tally.AddFired("on-time", []time.Time{now, now.Add(-LateAfter)}, now)
	tally.AddFired("behind", []time.Time{now.Add(-3 * time.Second), now.Add(-2 * time.Second), now.Add(-time.Second)}, now)
	for i := range 7 {
		tally.AddSkipped(fmt.Sprintf("s%d", i), i)
	}
	if tally.Fired != 5 || tally.Late != 2 || tally.MostLate != 3*time.Second || tally.LateSchedules != 1 ||
		len(tally.LateNames) != 1 || tally.LateNames[0] != "behind" {
		t.Fatalf("late ticks: %+v", tally)
	}
	if tally.Skipped != 21 || tally.SkippedSchedules != 6 || len(tally.SkippedNames) != tallyNames || tally.SkippedNames[0] != "s1" {
		t.Fatalf("skipped ticks: %+v", tally)
	}
}

type counting struct {
	Timetable
	n int
}

func (c *counting) Next(t time.Time) time.Time {
	c.n++
	return c.Timetable.Next(t)
}

func TestJobIDIsAName(t *testing.T) {
	t.Parallel()
	name := string(make([]byte, MaxNameLength))
	for i := range []byte(name) {
		name = name[:i] + "n" + name[i+1:]
	}
	id := JobID(name, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	if !job.ValidName(id) {
		t.Fatalf("tick job id %q (%d bytes) is not a valid job id", id, len(id))
	}
	a := JobID("s", time.UnixMilli(1000))
	if a != JobID("s", time.UnixMilli(1000)) || a == JobID("s", time.UnixMilli(2000)) {
		t.Fatal("tick job ids are not one per tick")
	}
}

// An expression that fires in every hour keeps firing in real time
// through the hour the clocks repeat: two 01:30 ticks an hour apart, 25
// hourly ticks that day.
func TestEveryHourKeepsItsPaceWhenClocksFallBack(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, ny)
	end := time.Date(2026, 11, 2, 0, 0, 0, 0, ny)
	for _, expr := range []string{"30 * * * *", "0 30 */1 * * *"} {
		got := ticks(mustParse(t, Timing{Cron: expr, Timezone: "America/New_York"}), start, end)
		if len(got) != 25 {
			t.Fatalf("%s: %d ticks on the day the clocks fall back, want 25", expr, len(got))
		}
	}
	if got := ticks(mustParse(t, Timing{Cron: "@hourly", Timezone: "America/New_York"}), start, end); len(got) != 25 {
		t.Fatalf("@hourly: %d ticks, want 25", len(got))
	}
}

// Fixed ticks around the hour the clocks skip: 01:30 fires, 02:30 fires
// at 03:30 and merges with the 03:30 tick into one firing; in Berlin,
// where the clocks go back at 03:00, a 02:30 tick fires once, in the
// first pass.
func TestFixedTicksAroundClockChanges(t *testing.T) {
	t.Parallel()
	ny, _ := time.LoadLocation("America/New_York")
	start := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	got := ticks(mustParse(t, Timing{Cron: "30 1,2,3 * * *", Timezone: "America/New_York"}), start, start.Add(23*time.Hour))
	var walls []string
	for _, g := range got {
		walls = append(walls, g.In(ny).Format("15:04"))
	}
	if len(walls) != 2 || walls[0] != "01:30" || walls[1] != "03:30" {
		t.Fatalf("01:30, 02:30 and 03:30 on the day the clocks spring forward fired at %v, want 01:30 and 03:30", walls)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	day := time.Date(2026, 10, 25, 0, 0, 0, 0, berlin)
	got = ticks(mustParse(t, Timing{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}), day, day.Add(25*time.Hour-time.Second))
	if len(got) != 1 || got[0].In(berlin).Format("15:04 MST") != "02:30 CEST" {
		t.Fatalf("02:30 in Berlin when the clocks go back: %v, want once at 02:30 CEST", got)
	}
}

// Day of month and day of week both restricted: a day matching either
// fires, as in every Unix cron.
func TestDayOfMonthOrDayOfWeek(t *testing.T) {
	t.Parallel()
	tt := mustParse(t, Timing{Cron: "0 0 1 * MON"})
	start := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC) // a Tuesday
	got := ticks(tt, start, start.AddDate(0, 0, 14))
	var days []string
	for _, g := range got {
		days = append(days, g.Format("Mon 02"))
	}
	want := []string{"Mon 30", "Tue 01", "Mon 07"}
	if len(days) != len(want) || days[0] != want[0] || days[1] != want[1] || days[2] != want[2] {
		t.Fatalf("0 0 1 * MON fired on %v, want %v", days, want)
	}
}

// Ranges and steps follow crontab(5): a reversed range and a step from a
// single value are refused, naming the cron field; a step larger than
// its range takes the range's start.
func TestCronRangesAndSteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cron, field string
	}{
		{"1-0 * * * *", "minute"},
		{"0 22-2 * * *", "hour"},
		{"0 0 31-1 * *", "day-of-month"},
		{"0 0 1 NOV-FEB *", "month"},
		{"0 0 * * FRI-MON", "day-of-week"},
		{"0 0 * * MON-SUN", "day-of-week"},
		{"59-0 0 0 * * *", "second"},
		{"5/15 * * * *", "minute"},
		{"0 0 1 JAN/3 *", "month"},
		{"*/0 * * * *", "minute"},
		{"0 */-1 * * *", "hour"},
		{"0 0 1-5/x * *", "day-of-month"},
		{"58-61 * * * *", "minute"},
		{"0 0 0 * *", "day-of-month"},
		{"0 0 * 1-13 *", "month"},
		{"0 0 * * 1,3-2", "day-of-week"},
	} {
		_, err := Parse(Timing{Cron: c.cron})
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != "cron" || !strings.Contains(in.Message, "the "+c.field+" field") {
			t.Errorf("%q: %v, want an input error on cron naming the %s field", c.cron, err, c.field)
		}
	}
	from := time.Date(2026, 11, 24, 10, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		cron string
		to   time.Duration
		want []string
	}{
		{"0 0 1 */12 *", 2 * 366 * 24 * time.Hour, []string{"2027-01-01 00:00", "2028-01-01 00:00"}},
		{"*/90 * * * *", 2 * time.Hour, []string{"11:00", "12:00"}},
		{"10-20/15 * * * *", 2 * time.Hour, []string{"10:10", "11:10"}},
		{"0-59/30 * * * *", time.Hour, []string{"10:30", "11:00"}},
		{"45/1000 10-11/24 * * *", 24 * time.Hour, nil},
		{"0 10-11/24 * * *", 24 * time.Hour, []string{"2026-11-25 10:00"}},
		{"0 0 * * 5-7", 7 * 24 * time.Hour, []string{"2026-11-27 00:00", "2026-11-28 00:00", "2026-11-29 00:00"}},
		{"0 0 * * SAT-SAT", 7 * 24 * time.Hour, []string{"2026-11-28 00:00"}},
		{"30 */10 * * * *", 20 * time.Minute, []string{"10:10:30", "10:20:30"}},
	} {
		tt, err := Parse(Timing{Cron: c.cron})
		if c.want == nil {
			if err == nil {
				t.Errorf("%q: accepted", c.cron)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.cron, err)
			continue
		}
		wantTicks(t, c.cron, ticks(tt, from, from.Add(c.to)), c.want)
	}
}

// A schedule stored before these rules with an expression they refuse
// keeps firing as it was read then: a reversed range wraps around, a step
// from a single value runs to the end of its field.
func TestParseStoredKeepsWhatWasAccepted(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 24, 20, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		cron string
		to   time.Duration
		want []string
	}{
		{"0 22-1 * * *", 6 * time.Hour, []string{"22:00", "23:00", "2026-11-25 00:00", "2026-11-25 01:00"}},
		{"40/10 20 * * *", time.Hour, []string{"20:40", "20:50"}},
	} {
		if _, err := Parse(Timing{Cron: c.cron}); err == nil {
			t.Errorf("%q: a new schedule accepted it", c.cron)
		}
		tt, err := ParseStored(Timing{Cron: c.cron})
		if err != nil {
			t.Fatalf("%q stored: %v", c.cron, err)
		}
		wantTicks(t, c.cron+" stored", ticks(tt, from, from.Add(c.to)), c.want)
	}
	if _, err := ParseStored(Timing{Cron: "61 * * * *"}); err == nil {
		t.Fatal("a stored expression the parser refuses was read")
	}
}

// wantTicks fails unless got are the ticks want, as matches reads them.
func wantTicks(t *testing.T, what string, got []time.Time, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = matches(got[i], want[i])
	}
	if !ok {
		t.Errorf("%s: ticks %v, want %v", what, got, want)
	}
}
