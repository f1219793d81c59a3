package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/client"
)

func (c *cli) queues(args []string) int {
	return c.sub("queues", args, map[string]func([]string) int{
		"list":        c.queuesList,
		"get":         func(a []string) int { return c.queueAction("get", a) },
		"pause":       func(a []string) int { return c.queueAction("pause", a) },
		"resume":      func(a []string) int { return c.queueAction("resume", a) },
		"durability":  c.queuesDurability,
		"limits":      c.queuesLimits,
		"settings":    c.queuesSettings,
		"purge":       c.queuesPurge,
		"retry":       func(a []string) int { return c.queueBulk("retry", a) },
		"delete-jobs": func(a []string) int { return c.queueBulk("delete-jobs", a) },
	}, "list|get|pause|resume|durability|limits|settings|purge|retry|delete-jobs")
}

func (c *cli) queuesList(args []string) int {
	fs, cm := c.flags("queues list", "queues list")
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	qs, err := cl.Queues(ctx)
	if err != nil {
		return c.report("queues list", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"queues": qs})
	}
	c.printQueues(qs...)
	return 0
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

// queueAction runs get, pause or resume on one queue.
func (c *cli) queueAction(action string, args []string) int {
	fs, cm := c.flags("queues "+action, "queues "+action+" NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	var q *client.Queue
	var err error
	switch action {
	case "pause":
		q, err = cl.PauseQueue(ctx, pos[0])
	case "resume":
		q, err = cl.ResumeQueue(ctx, pos[0])
	default:
		q, err = cl.Queue(ctx, pos[0])
	}
	if err != nil {
		return c.report("queues "+action, err)
	}
	if cm.asJSON {
		return c.printJSON(q)
	}
	c.printQueues(*q)
	return 0
}

// queuesDurability sets the level of the jobs later enqueued into a queue
// without one of their own.
func (c *cli) queuesDurability(args []string) int {
	fs, cm := c.flags("queues durability", "queues durability NAME full|process|memory")
	pos, code, ok := parse(fs, args, 2)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	q, err := cl.SetQueueDurability(ctx, pos[0], client.Durability(pos[1]))
	if err != nil {
		return c.report("queues durability", err)
	}
	if cm.asJSON {
		return c.printJSON(q)
	}
	c.printQueues(*q)
	return 0
}

// queuesLimits sets, shows or clears a queue's flow control. The limit
// flags replace the queue's limits as a whole; without any it shows them.
func (c *cli) queuesLimits(args []string) int {
	fs, cm := c.flags("queues limits",
		"queues limits NAME [--rate N/DURATION] [--max-active N] [--group-rate N/DURATION] [--group-max-active N] [--ordered] | NAME --clear")
	var l client.Limits
	rate, groupRate := &rateFlag{r: &l.Rate}, &rateFlag{r: &l.GroupRate}
	fs.Var(rate, "rate", "the queue's rate: at most N of its jobs start in any window of DURATION (`N/DURATION`, such as 100/1m or 10/s)")
	fs.IntVar(&l.MaxActive, "max-active", 0, "at most `N` of the queue's jobs active at once, 1 to 1000000")
	fs.Var(groupRate, "group-rate", "each group's rate: at most N of its jobs start in any window of DURATION (`N/DURATION`)")
	fs.IntVar(&l.GroupMaxActive, "group-max-active", 0, "at most `N` jobs of each group active at once (1: one at a time)")
	fs.BoolVar(&l.Ordered, "ordered", false, "make every group ordered: its jobs run one at a time, in enqueue order, a failed job holding its group until it finishes")
	clearAll := fs.Bool("clear", false, "remove every limit of the queue")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	limitFlags := set["rate"] || set["max-active"] || set["group-rate"] || set["group-max-active"] || set["ordered"]
	if *clearAll && limitFlags {
		fmt.Fprintln(c.errOut, "spool queues limits: --clear takes no limit flag")
		return 2
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max-active", l.MaxActive}, {"group-max-active", l.GroupMaxActive}} {
		if set[f.name] && f.n == 0 {
			fmt.Fprintf(c.errOut, "spool queues limits: --%s must be at least 1; leave it out for no limit\n", f.name)
			return 2
		}
	}
	return c.replaceOrShow("queues limits", cm, pos[0], *clearAll, limitFlags, (*client.Client).ClearQueueLimits,
		func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
			return cl.SetQueueLimits(ctx, name, l)
		})
}

// replaceOrShow ends a command that replaces a part of a queue as a whole:
// it clears that part, sets it, or with neither shows the queue, and
// prints the queue.
func (c *cli) replaceOrShow(cmd string, cm *common, name string, clearIt, setIt bool,
	clear, set func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error)) int {
	cl, ctx, done := cm.connect()
	defer done()
	var q *client.Queue
	var err error
	switch {
	case clearIt:
		q, err = clear(cl, ctx, name)
	case setIt:
		q, err = set(cl, ctx, name)
	default:
		q, err = cl.Queue(ctx, name)
	}
	if err != nil {
		return c.report(cmd, err)
	}
	if cm.asJSON {
		return c.printJSON(q)
	}
	c.printQueues(*q)
	return 0
}

// queuesSettings sets, shows or clears a queue's settings. The setting
// flags replace the queue's settings as a whole; without any it shows
// them.
func (c *cli) queuesSettings(args []string) int {
	fs, cm := c.flags("queues settings", "queues settings NAME [--dead-letter-queue QUEUE] [--max-wait DURATION] "+
		"[--default-lease DURATION] [--default-max-attempts N] [--default-delay DURATION] | NAME --clear")
	var s client.QueueSettings
	fs.StringVar(&s.DeadLetterQueue, "dead-letter-queue", "", "the `QUEUE` that gets a copy of every job of this queue that dies")
	fs.DurationVar(&s.MaxWait, "max-wait", 0, "how long a job may wait unstarted after its run time (`DURATION`, such as 30s or 1h): past it, it dies instead of starting")
	fs.DurationVar(&s.DefaultLease, "default-lease", 0, "the lease (`DURATION`, such as 5m) of the jobs enqueued without one, in place of the server's 30s")
	fs.IntVar(&s.DefaultMaxAttempts, "default-max-attempts", 0, "the maximum attempts (`N`, 1 to 1000) of the jobs enqueued without one, in place of the server's 25")
	fs.DurationVar(&s.DefaultDelay, "default-delay", 0, "the delay (`DURATION`, such as 10s) of the jobs enqueued without a delay or run time: they become available this long after their enqueue")
	clearAll := fs.Bool("clear", false, "remove every setting of the queue")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	settingFlags := set["dead-letter-queue"] || set["max-wait"] || set["default-lease"] ||
		set["default-max-attempts"] || set["default-delay"]
	if *clearAll && settingFlags {
		fmt.Fprintln(c.errOut, "spool queues settings: --clear takes no setting flag")
		return 2
	}
	if set["dead-letter-queue"] && s.DeadLetterQueue == "" {
		fmt.Fprintln(c.errOut, "spool queues settings: --dead-letter-queue must name a queue; leave it out for none")
		return 2
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
		if set[f.name] && !f.set {
			fmt.Fprintf(c.errOut, "spool queues settings: --%s must be positive; leave it out for none\n", f.name)
			return 2
		}
	}
	return c.replaceOrShow("queues settings", cm, pos[0], *clearAll, settingFlags, (*client.Client).ClearQueueSettings,
		func(cl *client.Client, ctx context.Context, name string) (*client.Queue, error) {
			return cl.SetQueueSettings(ctx, name, s)
		})
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

func (c *cli) queuesPurge(args []string) int {
	fs, cm := c.flags("queues purge", "queues purge NAME")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	n, err := cl.PurgeQueue(ctx, pos[0])
	if err != nil {
		return c.report("queues purge", err)
	}
	return c.printCount(cm, "purged", n)
}

// queueBulk retries or deletes every job of a queue in one state.
func (c *cli) queueBulk(action string, args []string) int {
	fs, cm := c.flags("queues "+action, "queues "+action+" NAME --state STATE")
	state := fs.String("state", "", "the state of the jobs to "+map[string]string{"retry": "retry (dead, cancelled, retrying or scheduled)", "delete-jobs": "delete (any but active)"}[action])
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	if *state == "" {
		fmt.Fprintf(c.errOut, "spool queues %s: --state is required\n", action)
		return 2
	}
	cl, ctx, done := cm.connect()
	defer done()
	var n int
	var err error
	if action == "retry" {
		n, err = cl.RetryQueueJobs(ctx, pos[0], client.State(*state))
	} else {
		n, err = cl.DeleteQueueJobs(ctx, pos[0], client.State(*state))
	}
	if err != nil {
		return c.report("queues "+action, err)
	}
	verb := map[string]string{"retry": "retried", "delete-jobs": "deleted"}[action]
	return c.printCount(cm, verb, n)
}

func (c *cli) printCount(cm *common, verb string, n int) int {
	if cm.asJSON {
		return c.printJSON(map[string]int{"count": n})
	}
	fmt.Fprintf(c.out, "%s %d jobs\n", verb, n)
	return 0
}
