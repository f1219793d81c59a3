package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spoolq/spool/client"
)

func (c *cli) queuesCommand() *cobra.Command {
	return c.client(c.group(&cobra.Command{
		Use:   "queues",
		Short: "List, get, pause, resume or purge queues; set their durability, limits and settings; retry or delete jobs by state",
		Example: `  spool queues list
  spool queues pause emails
  spool queues limits emails --group-max-active 1 --rate 100/1m
  spool queues retry emails --state dead`,
	}, c.queuesListCommand(), c.queueGetCommand(), c.queuePauseCommand(true), c.queuePauseCommand(false),
		c.queuesDurabilityCommand(), c.queuesLimitsCommand(), c.queuesSettingsCommand(), c.queuesPurgeCommand(),
		c.queueBulkCommand("retry"), c.queueBulkCommand("delete-jobs")), true)
}

func (c *cli) queuesListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the queues with their job counts, limits and settings",
		Example: "  spool queues list\n  spool queues list --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			qs, err := cl.Queues(ctx)
			if err != nil {
				return err
			}
			return c.show(map[string]any{"queues": qs}, func() { c.printQueues(qs...) })
		},
	}
}

// printQueues writes queues as a table with their counts, limits and
// settings.
func (c *cli) printQueues(qs ...client.Queue) {
	rows := make([][]string, len(qs))
	for i, q := range qs {
		n := q.Counts
		rows[i] = []string{q.Name, yesNo(q.Paused), string(q.Durability)}
		for _, v := range []int{n.Scheduled, n.Available, n.Active, n.Retrying, n.Completed, n.Dead, n.Cancelled} {
			rows[i] = append(rows[i], strconv.Itoa(v))
		}
		rows[i] = append(rows[i], formatLimits(q.Limits), formatSettings(q.Settings))
	}
	c.table([]string{"QUEUE", "PAUSED", "DURABILITY", "SCHEDULED", "AVAILABLE", "ACTIVE", "RETRYING", "COMPLETED", "DEAD", "CANCELLED", "LIMITS",
		"SETTINGS"}, rows)
}

func (c *cli) queueGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Aliases: []string{"show"},
		Short:   "Show one queue with its job counts, limits and settings",
		Example: "  spool queues get emails",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			q, err := cl.Queue(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(q, func() { c.printQueues(*q) })
		},
	}
}

// queuePauseCommand is pause (pause true) or resume of one queue.
func (c *cli) queuePauseCommand(pause bool) *cobra.Command {
	action, short, made := "resume", "Resume a paused queue: its jobs are handed out again", "not paused"
	if pause {
		action, short, made = "pause", "Pause a queue: it takes jobs but hands none out", "paused"
	}
	var create bool
	cmd := &cobra.Command{
		Use:     action + " NAME",
		Short:   short,
		Example: fmt.Sprintf("  spool queues %s emails\n  spool queues %s reports --create   # a queue that has no jobs yet", action, action),
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			if err := queueExists(ctx, cl, args[0], create, made); err != nil {
				return err
			}
			set := cl.ResumeQueue
			if pause {
				set = cl.PauseQueue
			}
			q, err := set(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(q, func() { c.printQueues(*q) })
		},
	}
	addCreate(cmd.Flags(), &create, made)
	return cmd
}

// addCreate defines --create, which lets a command that names a missing
// queue create it as made says.
func addCreate(fs *pflag.FlagSet, create *bool, made string) {
	fs.BoolVar(create, "create", false, "create the queue if it does not exist ("+made+"); without it a missing queue is an error")
}

// queueExists refuses to act on a queue that does not exist, unless create
// is set: the server would create it, and a misspelt name would become a
// new queue without a word. made says how --create would make it. The
// check and the action are two calls: a queue created between them is
// acted on like any other.
func queueExists(ctx context.Context, cl *client.Client, name string, create bool, made string) error {
	if create {
		return nil
	}
	_, err := cl.Queue(ctx, name)
	if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	hint := ";"
	if qs, err := cl.Queues(ctx); err == nil {
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		if s := closest(name, names); s != "" {
			hint = fmt.Sprintf("; did you mean %q?", s)
		}
	}
	return fmt.Errorf("queue %q does not exist%s pass --create to create it %s", name, hint, made)
}

// queuesDurabilityCommand sets the level of the jobs later enqueued into a
// queue without one of their own.
func (c *cli) queuesDurabilityCommand() *cobra.Command {
	var create bool
	const made = "with this level"
	cmd := &cobra.Command{
		Use:   "durability NAME full|process|memory",
		Short: "Set the durability of the jobs later enqueued into a queue without a level of their own",
		Long: `Set the durability of the jobs later enqueued into a queue without a level
of their own: full (fsync before the answer; survives power loss), process
(survives a crash of the process) or memory (lost with the process). Jobs
already in the queue keep theirs.`,
		Example: "  spool queues durability metrics process\n  spool queues durability audit full --create",
		Args:    exactArgs(2, "NAME and LEVEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			if err := queueExists(ctx, cl, args[0], create, made); err != nil {
				return err
			}
			q, err := cl.SetQueueDurability(ctx, args[0], client.Durability(args[1]))
			if err != nil {
				return err
			}
			return c.show(q, func() { c.printQueues(*q) })
		},
	}
	addCreate(cmd.Flags(), &create, made)
	return cmd
}

// queuesLimitsCommand sets, shows or clears a queue's flow control. The
// limit flags change the limits they name and leave the others (a merge,
// PATCH); --replace makes them the queue's limits as a whole (PUT). Without
// any it shows them.
func (c *cli) queuesLimitsCommand() *cobra.Command {
	var l client.Limits
	var clearAll, replace, create bool
	var unset []string
	const made = "with these limits"
	cmd := &cobra.Command{
		Use:   "limits NAME [--rate N/DURATION] [--max-active N] [--group-rate N/DURATION] [--group-max-active N] [--ordered] [--unset LIMIT,…] [--replace] | NAME --clear",
		Short: "Show, set or clear a queue's flow control: rates and caps, per queue and per group, and ordered groups",
		Long: `Show, set or clear a queue's flow control. The limit flags change the
limits they name and leave the others as they are; --unset removes the
named ones; --replace makes the flags the queue's limits as a whole,
removing those not named. Without any the command shows them.`,
		Example: `  spool queues limits emails --group-max-active 1 --rate 100/1m
  spool queues limits emails --max-active 50     # the rate and group cap stay
  spool queues limits emails --unset rate
  spool queues limits orders --ordered --create
  spool queues limits emails                     # show them
  spool queues limits emails --clear`,
		Args: exactArgs(1, "NAME"),
	}
	fs := cmd.Flags()
	fs.Var(&rateFlag{r: &l.Rate}, "rate", "the queue's rate: at most N of its jobs start in any window of DURATION (`N/DURATION`, such as 100/1m or 10/s)")
	fs.IntVar(&l.MaxActive, "max-active", 0, "at most `N` of the queue's jobs active at once, 1 to 1000000")
	fs.Var(&rateFlag{r: &l.GroupRate}, "group-rate", "each group's rate: at most N of its jobs start in any window of DURATION (`N/DURATION`)")
	fs.IntVar(&l.GroupMaxActive, "group-max-active", 0, "at most `N` jobs of each group active at once (1: one at a time)")
	fs.BoolVar(&l.Ordered, "ordered", false, "make every group ordered: its jobs run one at a time, in enqueue order, a failed job holding its group until it finishes")
	fs.StringSliceVar(&unset, "unset", nil, "remove the named `LIMIT`s (rate, max-active, group-rate, group-max-active, ordered), leaving the others")
	fs.BoolVar(&replace, "replace", false, "make the limit flags the queue's limits as a whole: remove those not named")
	fs.BoolVar(&clearAll, "clear", false, "remove every limit of the queue")
	addCreate(fs, &create, made)
	var p client.LimitsPatch
	fields := []patchField{
		{"rate", func() { p.Rate = client.SetRate(l.Rate) }, func() { p.Rate = client.Unset[client.RatePatch]() }},
		{"max-active", func() { p.MaxActive = client.SetTo(l.MaxActive) }, func() { p.MaxActive = client.Unset[int]() }},
		{"group-rate", func() { p.GroupRate = client.SetRate(l.GroupRate) }, func() { p.GroupRate = client.Unset[client.RatePatch]() }},
		{"group-max-active", func() { p.GroupMaxActive = client.SetTo(l.GroupMaxActive) }, func() { p.GroupMaxActive = client.Unset[int]() }},
		{"ordered", func() { p.Ordered = client.SetTo(l.Ordered) }, func() { p.Ordered = client.Unset[bool]() }},
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		for _, f := range []struct {
			name string
			n    int
		}{{"max-active", l.MaxActive}, {"group-max-active", l.GroupMaxActive}} {
			if fs.Changed(f.name) && f.n == 0 {
				return usagef("--%s must be at least 1; remove it with --unset %s", f.name, f.name)
			}
		}
		mode, err := changeMode(fs, fields, unset, clearAll, replace)
		if err != nil {
			return err
		}
		buildPatch(fs, fields, unset)
		return c.changeOrShow(args[0], mode, create, made, queueChanges{
			clear: (*client.Client).ClearQueueLimits,
			replace: func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
				return cl.SetQueueLimits(ctx, name, l)
			},
			merge: func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
				return cl.UpdateQueueLimits(ctx, name, p)
			},
		})
	}
	return cmd
}

// patchField is a field of a queue's limits or settings as a command's
// flag names it: set puts the flag's value in the command's patch, unset
// clears the field there.
type patchField struct {
	name       string
	set, unset func()
}

// buildPatch fills a command's patch from its flags: the fields unset
// names are cleared, those whose flag was given set.
func buildPatch(fs *pflag.FlagSet, fields []patchField, unset []string) {
	for _, f := range fields {
		if slices.Contains(unset, f.name) {
			f.unset()
		}
		if fs.Changed(f.name) {
			f.set()
		}
	}
}

// changeKind is what a limits or settings command does to the queue.
type changeKind int

const (
	showPart    changeKind = iota // change nothing: show the queue
	mergePart                     // change the named fields (PATCH)
	replacePart                   // replace the part as a whole (PUT)
	clearPart                     // remove the whole part (DELETE)
)

// changeMode tells what a limits or settings command was asked to do from
// its flags: those of fields, --unset's list, --clear and --replace.
// A name --unset does not know, or flags that contradict each other, are
// a usage error.
func changeMode(fs *pflag.FlagSet, fields []patchField, unset []string, clearAll, replace bool) (changeKind, error) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	for _, n := range unset {
		if !slices.Contains(names, n) {
			return 0, usagef("--unset: unknown name %q; want one of %s", n, strings.Join(names, ", "))
		}
		if fs.Changed(n) {
			return 0, usagef("--unset %s and --%s contradict each other", n, n)
		}
	}
	given := anyChanged(fs, names...)
	switch {
	case clearAll && (given || replace || len(unset) > 0):
		return 0, usagef("--clear takes no other flag but --create")
	case clearAll:
		return clearPart, nil
	case replace && len(unset) > 0:
		return 0, usagef("--replace removes what it does not name: leave out --unset")
	case replace && !given:
		return 0, usagef("--replace needs the flags to set; --clear removes everything")
	case replace:
		return replacePart, nil
	case given || len(unset) > 0:
		return mergePart, nil
	}
	return showPart, nil
}

// anyChanged reports whether any of the flags names was given.
func anyChanged(fs *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if fs.Changed(n) {
			return true
		}
	}
	return false
}

// queueChanges are the calls that change one part of a queue (its limits
// or its settings) in each way.
type queueChanges struct {
	clear, replace, merge func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error)
}

// changeOrShow ends a command that changes a part of a queue as mode says,
// or shows the queue, and prints the queue. Changing a queue that does not
// exist needs create.
func (c *cli) changeOrShow(name string, mode changeKind, create bool, made string, calls queueChanges) error {
	cl, ctx, done := c.connect()
	defer done()
	if mode != showPart {
		if err := queueExists(ctx, cl, name, create, made); err != nil {
			return err
		}
	}
	var q *client.Queue
	var err error
	switch mode {
	case clearPart:
		q, err = calls.clear(cl, ctx, name)
	case replacePart:
		q, err = calls.replace(cl, ctx, name)
	case mergePart:
		q, err = calls.merge(cl, ctx, name)
	default:
		q, err = cl.Queue(ctx, name)
	}
	if err != nil {
		return err
	}
	return c.show(q, func() { c.printQueues(*q) })
}

// queuesSettingsCommand sets, shows or clears a queue's settings. The
// setting flags change the settings they name and leave the others (a
// merge, PATCH); --replace makes them the queue's settings as a whole
// (PUT). Without any it shows them.
func (c *cli) queuesSettingsCommand() *cobra.Command {
	var s client.QueueSettings
	var clearAll, replace, create bool
	var unset []string
	const made = "with these settings"
	cmd := &cobra.Command{
		Use: "settings NAME [--dead-letter-queue QUEUE] [--max-wait DURATION] " +
			"[--default-lease DURATION] [--default-max-attempts N] [--default-delay DURATION] [--unset SETTING,…] [--replace] | NAME --clear",
		Short: "Show, set or clear a queue's settings: dead-letter queue, maximum wait, defaults of its jobs",
		Long: `Show, set or clear a queue's settings. The setting flags change the
settings they name and leave the others as they are; --unset removes the
named ones; --replace makes the flags the queue's settings as a whole,
removing those not named. Without any the command shows them.`,
		Example: `  spool queues settings orders --dead-letter-queue orders-dlq --max-wait 1h
  spool queues settings orders --default-lease 5m   # the dead-letter queue and maximum wait stay
  spool queues settings orders --unset max-wait
  spool queues settings orders                      # show them
  spool queues settings orders --clear`,
		Args: exactArgs(1, "NAME"),
	}
	fs := cmd.Flags()
	fs.StringVar(&s.DeadLetterQueue, "dead-letter-queue", "", "the `QUEUE` that gets a copy of every job of this queue that dies")
	fs.DurationVar(&s.MaxWait, "max-wait", 0, "how long a job may wait unstarted after its run time (`DURATION`, such as 30s or 1h): past it, it dies instead of starting")
	fs.DurationVar(&s.DefaultLease, "default-lease", 0, "the lease (`DURATION`, such as 5m) of the jobs enqueued without one, in place of the server's 30s")
	fs.IntVar(&s.DefaultMaxAttempts, "default-max-attempts", 0, "the maximum attempts (`N`, 1 to 1000) of the jobs enqueued without one, in place of the server's 25")
	fs.DurationVar(&s.DefaultDelay, "default-delay", 0, "the delay (`DURATION`, such as 10s) of the jobs enqueued without a delay or run time: they become available this long after their enqueue")
	fs.StringSliceVar(&unset, "unset", nil, "remove the named `SETTING`s (dead-letter-queue, max-wait, default-lease, default-max-attempts, default-delay), leaving the others")
	fs.BoolVar(&replace, "replace", false, "make the setting flags the queue's settings as a whole: remove those not named")
	fs.BoolVar(&clearAll, "clear", false, "remove every setting of the queue")
	addCreate(fs, &create, made)
	var p client.QueueSettingsPatch
	fields := []patchField{
		{"dead-letter-queue", func() { p.DeadLetterQueue = client.SetTo(s.DeadLetterQueue) }, func() { p.DeadLetterQueue = client.Unset[string]() }},
		{"max-wait", func() { p.MaxWait = client.SetTo(s.MaxWait) }, func() { p.MaxWait = client.Unset[time.Duration]() }},
		{"default-lease", func() { p.DefaultLease = client.SetTo(s.DefaultLease) }, func() { p.DefaultLease = client.Unset[time.Duration]() }},
		{"default-max-attempts", func() { p.DefaultMaxAttempts = client.SetTo(s.DefaultMaxAttempts) }, func() { p.DefaultMaxAttempts = client.Unset[int]() }},
		{"default-delay", func() { p.DefaultDelay = client.SetTo(s.DefaultDelay) }, func() { p.DefaultDelay = client.Unset[time.Duration]() }},
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if fs.Changed("dead-letter-queue") && s.DeadLetterQueue == "" {
			return usagef("--dead-letter-queue must name a queue; remove it with --unset dead-letter-queue")
		}
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"max-wait", s.MaxWait > 0},
			{"default-lease", s.DefaultLease > 0},
			{"default-max-attempts", s.DefaultMaxAttempts > 0},
			{"default-delay", s.DefaultDelay > 0},
		} {
			if fs.Changed(f.name) && !f.set {
				return usagef("--%s must be positive; remove it with --unset %s", f.name, f.name)
			}
		}
		mode, err := changeMode(fs, fields, unset, clearAll, replace)
		if err != nil {
			return err
		}
		buildPatch(fs, fields, unset)
		return c.changeOrShow(args[0], mode, create, made, queueChanges{
			clear: (*client.Client).ClearQueueSettings,
			replace: func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
				return cl.SetQueueSettings(ctx, name, s)
			},
			merge: func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
				return cl.UpdateQueueSettings(ctx, name, p)
			},
		})
	}
	return cmd
}

// formatSettings writes s compactly, in the form of the flags that set it:
// "dead-letter-queue=orders-dlq max-wait=1m default-lease=5m"; empty when
// none.
func formatSettings(s client.QueueSettings) string {
	var parts []string
	if s.DeadLetterQueue != "" {
		parts = append(parts, "dead-letter-queue="+s.DeadLetterQueue)
	}
	if s.MaxWait != 0 {
		parts = append(parts, "max-wait="+formatDuration(s.MaxWait))
	}
	if s.DefaultLease != 0 {
		parts = append(parts, "default-lease="+formatDuration(s.DefaultLease))
	}
	if s.DefaultMaxAttempts != 0 {
		parts = append(parts, "default-max-attempts="+strconv.Itoa(s.DefaultMaxAttempts))
	}
	if s.DefaultDelay != 0 {
		parts = append(parts, "default-delay="+formatDuration(s.DefaultDelay))
	}
	return strings.Join(parts, " ")
}

// rateFlag reads a rate written N/DURATION into r: "100/1m", "10/s".
type rateFlag struct{ r *client.Rate }

func (f *rateFlag) String() string {
	if f.r == nil || f.r.IsZero() {
		return ""
	}
	return formatRate(*f.r)
}

func (f *rateFlag) Type() string { return "rate" }

func (f *rateFlag) Set(v string) error {
	n, d, ok := strings.Cut(v, "/")
	if !ok {
		return errors.New("want N/DURATION, such as 100/1m or 10/s")
	}
	limit, err := strconv.Atoi(n)
	if err != nil {
		return fmt.Errorf("%q is not a whole number of jobs", n)
	}
	if d != "" && d[0] >= 'a' && d[0] <= 'z' {
		d = "1" + d // a bare unit: 10/s is 10/1s
	}
	period, err := time.ParseDuration(d)
	if err != nil {
		return fmt.Errorf("read the window: %w", err)
	}
	*f.r = client.Rate{Limit: limit, Period: period}
	return nil
}

// formatLimits writes l compactly, in the form of the flags that set it:
// "rate=100/1m max-active=7 group-max-active=1"; empty when none.
func formatLimits(l client.Limits) string {
	var parts []string
	if !l.Rate.IsZero() {
		parts = append(parts, "rate="+formatRate(l.Rate))
	}
	if l.MaxActive != 0 {
		parts = append(parts, "max-active="+strconv.Itoa(l.MaxActive))
	}
	if !l.GroupRate.IsZero() {
		parts = append(parts, "group-rate="+formatRate(l.GroupRate))
	}
	if l.GroupMaxActive != 0 {
		parts = append(parts, "group-max-active="+strconv.Itoa(l.GroupMaxActive))
	}
	if l.Ordered {
		parts = append(parts, "ordered")
	}
	return strings.Join(parts, " ")
}

// formatRate writes r as N/DURATION with the duration's zero units left
// out: "100/1m", "3/1.5s", "5/24h".
func formatRate(r client.Rate) string {
	return strconv.Itoa(r.Limit) + "/" + formatDuration(r.Period)
}

// formatDuration writes d with its zero units left out: "1m", "1.5s",
// "24h", "1h30m".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (c *cli) queuesPurgeCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "purge NAME",
		Short:   "Delete every job of a queue that is not active",
		Example: "  spool queues purge emails",
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			n, err := cl.PurgeQueue(ctx, args[0])
			if err != nil {
				return err
			}
			return c.printCount("purged", n)
		},
	}
}

// queueBulkCommand retries or deletes every job of a queue in one state.
func (c *cli) queueBulkCommand(action string) *cobra.Command {
	var state string
	short := map[string]string{"retry": "Retry every job of a queue in one state (dead, cancelled, retrying or scheduled)",
		"delete-jobs": "Delete every job of a queue in one state (any but active)"}[action]
	cmd := &cobra.Command{
		Use:     action + " NAME --state STATE",
		Short:   short,
		Example: fmt.Sprintf("  spool queues %s emails --state dead", action),
		Args:    exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if state == "" {
				return usagef("--state is required")
			}
			cl, ctx, done := c.connect()
			defer done()
			bulk := cl.DeleteQueueJobs
			if action == "retry" {
				bulk = cl.RetryQueueJobs
			}
			n, err := bulk(ctx, args[0], client.State(state))
			if err != nil {
				return err
			}
			return c.printCount(map[string]string{"retry": "retried", "delete-jobs": "deleted"}[action], n)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the state of the jobs to "+map[string]string{"retry": "retry (dead, cancelled, retrying or scheduled)", "delete-jobs": "delete (any but active)"}[action])
	return cmd
}

func (c *cli) printCount(verb string, n int) error {
	return c.show(map[string]int{"count": n}, func() { fmt.Fprintf(c.out, "%s %d jobs\n", verb, n) })
}
