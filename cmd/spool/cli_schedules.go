package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/client"
)

func (c *cli) schedulesCommand() *cobra.Command {
	return c.client(c.group(&cobra.Command{
		Use:   "schedules",
		Short: "List, get, put, delete, pause, resume or trigger cron schedules",
		Example: `  spool schedules put digest --cron "*/5 * * * *" --queue reports --kind digest
  spool schedules list
  spool schedules trigger digest`,
	}, c.schedulesListCommand(), c.schedulesGetCommand(), c.schedulesPutCommand(), c.schedulesDeleteCommand(),
		c.scheduleActionCommand("pause"), c.scheduleActionCommand("resume"), c.schedulesTriggerCommand()), true)
}

func (c *cli) schedulesListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the schedules with their timing, job and next run",
		Example: "  spool schedules list",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			ss, err := cl.ListSchedules(ctx)
			if err != nil {
				return err
			}
			return c.show(map[string]any{"schedules": ss}, func() { c.printSchedules(ss...) })
		},
	}
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

func (c *cli) schedulesGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"show"},
		Short:   "Show one schedule with its job template",
		Example: "  spool schedules get digest",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			s, err := cl.GetSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(s, func() { c.printSchedule(s) })
		},
	}
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

// schedulesPutCommand creates or replaces a schedule from flags: its
// timing, its misfire policy and the job it enqueues, described by
// enqueue's flags.
func (c *cli) schedulesPutCommand() *cobra.Command {
	var spec client.ScheduleSpec
	var misfire string
	cmd := &cobra.Command{
		Use:   "put NAME (--cron EXPR [--timezone TZ] | --every D) --kind KIND [--queue Q] [--payload JSON|-] [flags]",
		Short: "Create or replace a schedule: when it fires and the job it enqueues",
		Example: `  spool schedules put digest --cron "*/5 * * * *" --queue reports --kind digest
  spool schedules put nightly --cron "0 3 * * *" --timezone Europe/Berlin --kind cleanup --misfire run_once
  spool schedules put pulse --every 1h --kind ping --paused`,
		Args: exactArgs(1, "NAME"),
	}
	fs := cmd.Flags()
	fs.StringVar(&spec.Cron, "cron", "", "cron expression: minute hour day-of-month month day-of-week, an optional leading seconds field, or @hourly, @daily, …")
	fs.StringVar(&spec.Timezone, "timezone", "", "IANA time zone the cron expression is read in (default UTC)")
	fs.DurationVar(&spec.Every, "every", 0, "fire at every multiple of this interval since the Unix epoch, 1s to 8784h (instead of --cron)")
	fs.StringVar(&misfire, "misfire", "", "what to do about missed ticks: skip, run_once or catch_up (default skip)")
	fs.IntVar(&spec.MaxCatchUp, "max-catch-up", 0, "most missed ticks catch_up fires at once, 1 to 10000 (default 100)")
	fs.BoolVar(&spec.Paused, "paused", false, "create the schedule paused, or pause it (without it, a put resumes the schedule)")
	jf := addJobFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		spec.Misfire = client.Misfire(misfire)
		job, err := jf.params(c.stdin())
		if err != nil {
			return err
		}
		spec.Job = job
		cl, ctx, done := c.connect()
		defer done()
		s, created, err := cl.PutSchedule(ctx, args[0], spec)
		if err != nil {
			return err
		}
		return c.show(s, func() {
			c.printSchedules(*s)
			if !created {
				fmt.Fprintf(c.errOut, "replaced the definition of schedule %s\n", s.Name)
			}
		})
	}
	return cmd
}

// scheduleActionCommand pauses or resumes one schedule.
func (c *cli) scheduleActionCommand(action string) *cobra.Command {
	short := map[string]string{"pause": "Pause a schedule: it fires no more until resumed",
		"resume": "Resume a paused schedule"}[action]
	return &cobra.Command{
		Use:     action + " NAME",
		Short:   short,
		Example: "  spool schedules " + action + " digest",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			act := cl.ResumeSchedule
			if action == "pause" {
				act = cl.PauseSchedule
			}
			s, err := act(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(s, func() { c.printSchedules(*s) })
		},
	}
}

func (c *cli) schedulesTriggerCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "trigger NAME",
		Short:   "Enqueue a schedule's job now, outside its timing",
		Example: "  spool schedules trigger digest",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			res, err := cl.TriggerSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(res, func() {
				j := res.Job
				c.table([]string{"ID", "STATE", "DUPLICATE"}, [][]string{{j.ID, string(j.State), yesNo(j.Duplicate)}})
			})
		},
	}
}

func (c *cli) schedulesDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a schedule; the jobs it enqueued stay",
		Example: "  spool schedules delete digest",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			if err := cl.DeleteSchedule(ctx, args[0]); err != nil {
				return err
			}
			return c.show(map[string]any{"name": args[0], "deleted": true}, func() { fmt.Fprintf(c.out, "deleted schedule %s\n", args[0]) })
		},
	}
}
