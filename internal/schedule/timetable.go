// Package schedule decides when cron schedules fire: it parses a
// schedule's timing (a cron expression in an IANA time zone, or a fixed
// interval), lists the ticks that are due at a moment under a misfire
// policy, and names the job of each tick. It holds no state and does no
// I/O: the maintenance service that fires schedules keeps the last tick
// handled in the store and asks this package what comes next.
package schedule

import (
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"

	"github.com/spoolq/spool/internal/job"
)

// Timing is when a schedule fires, as a client gives it: Cron (with
// Timezone) or Every, never both.
type Timing struct {
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), an optional leading seconds field, or a
	// shorthand such as @hourly, @daily, @weekly, @monthly, @yearly.
	Cron string
	// Timezone is the IANA zone the expression is read in. Defaults to
	// UTC.
	Timezone string
	// Every fires at every multiple of this interval since the Unix epoch
	// (every 5 minutes fires at :00, :05, …), the same ticks on every
	// node whatever the time the schedule was made.
	Every time.Duration
}

// Limits of a timing.
const (
	// MinEvery is the shortest interval of Every.
	MinEvery = time.Second
	// MaxEvery is the longest interval of Every.
	MaxEvery = 366 * 24 * time.Hour
	// maxCronBytes bounds a cron expression.
	maxCronBytes = 256
)

// Timetable lists the ticks of one timing.
type Timetable interface {
	// Next returns the first tick strictly after t, or the zero time when
	// there is none.
	Next(t time.Time) time.Time
}

// parser reads five or six fields and the shorthands. Jenkins-style hash
// fields, year fields and @every are not part of the grammar: @every
// counts from whenever it is asked, so its ticks would differ between
// nodes (Every gives fixed ticks instead).
// When both the day-of-month and the day-of-week fields are restricted, a
// day matching either fires, as in every Unix cron. Ranges and steps are
// held to crontab(5) before it reads them (see crontab).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor | cron.DowOrDom)

// Parse checks t and returns its timetable. Errors are *job.InputError
// naming the field at fault: "cron", "timezone" or "every_ms".
func Parse(t Timing) (Timetable, error) {
	return parse(t, true)
}

// ParseStored returns the timetable of a timing kept in the store. It
// reads it as Parse does, except that a cron expression which the rules
// of ranges and steps (see grammar.go) refuse, but which a server before
// them accepted and stored, keeps the meaning it had then (a reversed
// range wraps around, a step from a single value runs to the field's
// end), so that such a schedule goes on firing until it is redefined.
func ParseStored(t Timing) (Timetable, error) {
	return parse(t, false)
}

// parse is Parse, or ParseStored when not strict.
func parse(t Timing, strict bool) (Timetable, error) {
	switch {
	case t.Cron == "" && t.Every == 0:
		return nil, job.Invalid("cron", "either cron or every_ms is required")
	case t.Cron != "" && t.Every != 0:
		return nil, job.Invalid("every_ms", "cannot be combined with cron")
	case t.Every != 0:
		if t.Timezone != "" {
			return nil, job.Invalid("timezone", "applies to cron only; every_ms counts from the Unix epoch")
		}
		if t.Every < MinEvery || t.Every > MaxEvery || t.Every%time.Millisecond != 0 {
			return nil, job.Invalid("every_ms", "must be between %d and %d", MinEvery.Milliseconds(), MaxEvery.Milliseconds())
		}
		return interval(t.Every), nil
	}
	loc := time.UTC
	if t.Timezone != "" {
		var err error
		if loc, err = LoadZone(t.Timezone); err != nil {
			return nil, err
		}
	}
	expr := strings.TrimSpace(t.Cron)
	switch {
	case len(expr) > maxCronBytes:
		return nil, job.Invalid("cron", "must be at most %d bytes", maxCronBytes)
	case strings.Contains(expr, "TZ="):
		return nil, job.Invalid("cron", "must not name a time zone; set timezone instead")
	case strings.HasPrefix(expr, "@every"):
		return nil, job.Invalid("cron", "@every is not supported; set every_ms instead")
	}
	read, refused := crontab(expr)
	switch {
	case refused != nil && strict:
		return nil, job.Invalid("cron", "is not a cron expression: %v", refused)
	case refused != nil:
		read = expr
	}
	s, err := parser.Parse(read)
	if err != nil {
		return nil, job.Invalid("cron", "is not a cron expression: %v", err)
	}
	tt := zoned{s: s, loc: loc, everyHour: everyHour(read)}
	if tt.Next(time.Unix(0, 0)).IsZero() {
		return nil, job.Invalid("cron", "never fires")
	}
	return tt, nil
}

// LoadZone resolves an IANA time zone name; "Local" and unknown names are
// refused, since nodes on different hosts must agree on every tick.
func LoadZone(name string) (*time.Location, error) {
	if name == "Local" || name == "" {
		return nil, job.Invalid("timezone", "must be an IANA time zone name such as Europe/Berlin or UTC")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, job.Invalid("timezone", "%q is not a known IANA time zone", name)
	}
	return loc, nil
}

// zoned is a cron expression read in a time zone.
type zoned struct {
	s   cron.Schedule
	loc *time.Location
	// everyHour is set when the expression fires in every hour (its hour
	// field is a wildcard): such a schedule keeps its pace through an
	// hour the clocks repeat instead of firing once.
	everyHour bool
}

// everyHour reports whether a valid expression's hour field is a
// wildcard ("*" or "*/n"), or it is @hourly.
func everyHour(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr == "@hourly"
	}
	fields := strings.Fields(expr)
	return strings.HasPrefix(fields[len(fields)-4], "*")
}

// Next implements Timetable. An expression with fixed hours is read on
// the zone's wall clock: across a change of daylight-saving time, a tick
// in the hour the clocks skip fires once, as far later on the clock as the
// clocks jumped (02:30 fires at 03:30; ticks the jump puts on one moment
// fire once), and a tick in the hour the clocks repeat fires once, in the
// first pass. An expression that fires in every
// hour keeps its pace in real time through both.
func (z zoned) Next(t time.Time) time.Time {
	if z.everyHour {
		next := z.s.Next(t.In(z.loc))
		if next.IsZero() {
			return next
		}
		return next.UTC()
	}
	wall := wallClock(t.In(z.loc))
	for {
		wall = z.s.Next(wall)
		if wall.IsZero() {
			return wall
		}
		if at := instant(wall, z.loc); at.After(t) {
			return at.UTC()
		}
	}
}

// wallClock is the clock reading of t, as the same reading in UTC.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the moment the clocks of loc read wall (a reading held in
// UTC): the first of two when the clocks went back over it, and, when
// they jumped over it, the moment as far past the jump as wall lies past
// its start.
func instant(wall time.Time, loc *time.Location) time.Time {
	_, before := wall.Add(-26 * time.Hour).In(loc).Zone()
	_, after := wall.Add(26 * time.Hour).In(loc).Zone()
	early := wall.Add(-time.Duration(before) * time.Second)
	late := wall.Add(-time.Duration(after) * time.Second)
	if late.Before(early) {
		early, late = late, early
	}
	switch {
	case wallClock(early.In(loc)).Equal(wall):
		return early
	case wallClock(late.In(loc)).Equal(wall):
		return late
	}
	// In the gap: read with the offset before the jump.
	return wall.Add(-time.Duration(before) * time.Second)
}

// interval fires at every multiple of itself since the Unix epoch.
type interval time.Duration

// Next implements Timetable.
func (d interval) Next(t time.Time) time.Time {
	return time.Unix(0, 0).UTC().Add(time.Duration(d.multiples(t)+1) * time.Duration(d))
}

// multiples is how many of d's ticks lie after the Unix epoch and not
// after t (negative before the epoch): d's ticks after t begin at the
// next multiple.
func (d interval) multiples(t time.Time) int64 {
	step := time.Duration(d)
	since := t.Sub(time.Unix(0, 0).UTC())
	n := int64(since / step)
	if since < 0 && since%step != 0 {
		n--
	}
	return n
}

// String describes t for logs.
func (t Timing) String() string {
	if t.Every != 0 {
		return fmt.Sprintf("every %v", t.Every)
	}
	zone := t.Timezone
	if zone == "" {
		zone = "UTC"
	}
	return fmt.Sprintf("%q in %s", t.Cron, zone)
}
