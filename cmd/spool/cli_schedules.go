package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spoolq/spool/client"
)

func (c *cli) schedules(args []string) int {
	return c.sub("schedules", args, map[string]func([]string) int{
		"list":    c.schedulesList,
		"get":     c.schedulesGet,
		"put":     c.schedulesPut,
		"delete":  c.schedulesDelete,
		"pause":   func(a []string) int { return c.scheduleAction("pause", a) },
		"resume":  func(a []string) int { return c.scheduleAction("resume", a) },
		"trigger": c.schedulesTrigger,
	}, "list|get|put|delete|pause|resume|trigger")
}

func (c *cli) schedulesList(args []string) int {
	fs, cm := c.flags("schedules list", "schedules list")
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	ss, err := cl.ListSchedules(ctx)
	if err != nil {
		return c.report("schedules list", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"schedules": ss})
	}
	c.printSchedules(ss...)
	return 0
}

// printSchedules writes schedules as a table, one line each.
func (c *cli) printSchedules(ss ...client.Schedule) {
	rows := make([][]string, len(ss))
	for i := range ss {
		s := &ss[i]
		queue, kind := templateJob(s.Job)
		rows[i] = []string{s.Name, timing(s), queue, kind, string(s.Misfire), yesNo(s.Paused),
			shortTime(s.NextRunAt), shortTime(s.LastRunAt), s.LastJobID}
	}
	c.table([]string{"SCHEDULE", "TIMING", "QUEUE", "KIND", "MISFIRE", "PAUSED", "NEXT RUN", "LAST RUN", "LAST JOB"}, rows)
}

// timing describes when s fires: "0 3 * * * (Europe/Berlin)" or
// "every 5m0s".
func timing(s *client.Schedule) string {
	if s.Every != 0 {
		return "every " + s.Every.String()
	}
	return s.Cron + " (" + s.Timezone + ")"
}

// templateJob reads the queue and kind of a schedule's job template.
func templateJob(raw json.RawMessage) (queue, kind string) {
	var t struct {
		Queue string `json:"queue"`
		Kind  string `json:"kind"`
	}
	_ = json.Unmarshal(raw, &t) // the server checked it; a field it lacks stays empty
	if t.Queue == "" {
		t.Queue = "default"
	}
	return t.Queue, t.Kind
}

func (c *cli) schedulesGet(args []string) int {
	fs, cm := c.flags("schedules get", "schedules get NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	s, err := cl.GetSchedule(ctx, pos[0])
	if err != nil {
		return c.report("schedules get", err)
	}
	if cm.asJSON {
		return c.printJSON(s)
	}
	c.printSchedule(s)
	return 0
}

// printSchedule writes a schedule as aligned "field value" lines.
func (c *cli) printSchedule(s *client.Schedule) {
	rows := [][]string{
		{"name", s.Name}, {"timing", timing(s)}, {"misfire", string(s.Misfire)},
		{"max catch-up", strconv.Itoa(s.MaxCatchUp)}, {"paused", yesNo(s.Paused)}, {"job", string(s.Job)},
		{"created", shortTime(s.CreatedAt)}, {"updated", shortTime(s.UpdatedAt)},
	}
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, []string{k, v})
		}
	}
	add("next run", shortTime(s.NextRunAt))
	add("last run", shortTime(s.LastRunAt))
	add("last job", s.LastJobID)
	tw := make([][]string, len(rows))
	for i, r := range rows {
		tw[i] = []string{r[0] + ":", r[1]}
	}
	c.table([]string{"FIELD", "VALUE"}, tw)
}

// schedulesPut creates or replaces a schedule from flags: its timing, its
// misfire policy and the job it enqueues, described by enqueue's flags.
func (c *cli) schedulesPut(args []string) int {
	fs, cm := c.flags("schedules put",
		"schedules put NAME (--cron EXPR [--timezone TZ] | --every D) --kind KIND [--queue Q] [--payload JSON|-] [flags]")
	var spec client.ScheduleSpec
	var misfire string
	fs.StringVar(&spec.Cron, "cron", "", "cron expression: minute hour day-of-month month day-of-week, an optional leading seconds field, or @hourly, @daily, …")
	fs.StringVar(&spec.Timezone, "timezone", "", "IANA time zone the cron expression is read in (default UTC)")
	fs.DurationVar(&spec.Every, "every", 0, "fire at every multiple of this interval since the Unix epoch, 1s to 8784h (instead of --cron)")
	fs.StringVar(&misfire, "misfire", "", "what to do about missed ticks: skip, run_once or catch_up (default skip)")
	fs.IntVar(&spec.MaxCatchUp, "max-catch-up", 0, "most missed ticks catch_up fires at once, 1 to 10000 (default 100)")
	fs.BoolVar(&spec.Paused, "paused", false, "create the schedule paused, or pause it (without it, a put resumes the schedule)")
	jf := addJobFlags(fs)
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	spec.Misfire = client.Misfire(misfire)
	job, err := jf.params(c.stdin())
	if err != nil {
		return c.report("schedules put", err)
	}
	spec.Job = job
	cl, ctx, done := cm.connect()
	defer done()
	s, created, err := cl.PutSchedule(ctx, pos[0], spec)
	if err != nil {
		return c.report("schedules put", err)
	}
	if cm.asJSON {
		return c.printJSON(s)
	}
	c.printSchedules(*s)
	if !created {
		fmt.Fprintf(c.errOut, "replaced the definition of schedule %s\n", s.Name)
	}
	return 0
}

// scheduleAction pauses or resumes one schedule.
func (c *cli) scheduleAction(action string, args []string) int {
	fs, cm := c.flags("schedules "+action, "schedules "+action+" NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	var s *client.Schedule
	var err error
	if action == "pause" {
		s, err = cl.PauseSchedule(ctx, pos[0])
	} else {
		s, err = cl.ResumeSchedule(ctx, pos[0])
	}
	if err != nil {
		return c.report("schedules "+action, err)
	}
	if cm.asJSON {
		return c.printJSON(s)
	}
	c.printSchedules(*s)
	return 0
}

func (c *cli) schedulesTrigger(args []string) int {
	fs, cm := c.flags("schedules trigger", "schedules trigger NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	res, err := cl.TriggerSchedule(ctx, pos[0])
	if err != nil {
		return c.report("schedules trigger", err)
	}
	if cm.asJSON {
		return c.printJSON(res)
	}
	j := res.Job
	c.table([]string{"ID", "STATE", "DUPLICATE"}, [][]string{{j.ID, string(j.State), yesNo(j.Duplicate)}})
	return 0
}

func (c *cli) schedulesDelete(args []string) int {
	fs, cm := c.flags("schedules delete", "schedules delete NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	if err := cl.DeleteSchedule(ctx, pos[0]); err != nil {
		return c.report("schedules delete", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"name": pos[0], "deleted": true})
	}
	fmt.Fprintf(c.out, "deleted schedule %s\n", pos[0])
	return 0
}
