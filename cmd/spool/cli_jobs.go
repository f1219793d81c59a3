package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spoolq/spool/client"
)

// listFlag collects a repeatable flag; commas also separate values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Type() string { return "strings" }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// jsonArg reads a JSON value given on the command line, or from standard
// input when it is "-". An empty value is no value.
func jsonArg(v string, stdin io.Reader) (json.RawMessage, error) {
	if v == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %w", err)
		}
		v = string(data)
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if !json.Valid([]byte(v)) {
		return nil, fmt.Errorf("%.40q is not valid JSON (quote strings: '\"text\"')", v)
	}
	return json.RawMessage(v), nil
}

// jobFlags are the flags that describe a job, for enqueue and for the job
// template of a schedule.
type jobFlags struct {
	p                   client.EnqueueParams
	payload, durability string
	tags                listFlag
}

// addJobFlags defines the flags of a job on fs but its id and run time,
// which only an enqueue takes.
func addJobFlags(fs *pflag.FlagSet) *jobFlags {
	f := &jobFlags{}
	fs.StringVar(&f.p.Queue, "queue", "", "queue (default \"default\")")
	fs.StringVar(&f.p.Kind, "kind", "", "kind: the handler that runs the job (required)")
	fs.StringVar(&f.payload, "payload", "", "payload as JSON, or - to read it from standard input")
	fs.IntVar(&f.p.Priority, "priority", 0, "priority, -1000 to 1000; higher runs first")
	fs.DurationVar(&f.p.Delay, "delay", 0, "make the job available after this long (default: the queue's default delay, else none)")
	fs.IntVar(&f.p.MaxAttempts, "max-attempts", 0, "attempts before the job is dead (default: the queue's default, else 25)")
	fs.DurationVar(&f.p.Lease, "lease", 0, "lease of each hand-out (default: the queue's default, else 30s)")
	fs.StringVar(&f.p.UniqueKey, "unique-key", "", "unique key within the queue")
	fs.DurationVar(&f.p.UniqueFor, "unique-for", 0, "uniqueness window (default: while the job is pending)")
	fs.Var(&f.tags, "tag", "tag (repeatable, or comma-separated)")
	fs.StringVar(&f.p.Group, "group", "", "the job's group `G`: the tenant, customer or entity it belongs to, for flow control and ordered queues (see spool queues limits)")
	fs.StringVar(&f.durability, "durability", "", "how the job is kept: full, process or memory (default: the queue's level)")
	fs.StringVar(&f.p.TraceParent, "traceparent", "", "the W3C traceparent `TP` of the trace the job continues (00-<32 hex>-<16 hex>-<2 hex>)")
	return f
}

// params returns the job the parsed flags describe, reading its payload
// from stdin when --payload is "-".
func (f *jobFlags) params(stdin io.Reader) (client.EnqueueParams, error) {
	p := f.p
	p.Tags = f.tags
	p.Durability = client.Durability(f.durability)
	raw, err := jsonArg(f.payload, stdin)
	if err != nil {
		return p, fmt.Errorf("--payload: %w", err)
	}
	if raw != nil {
		p.Payload = raw
	}
	return p, nil
}

func (c *cli) enqueueCommand() *cobra.Command {
	var id, runAt string
	cmd := &cobra.Command{
		Use:   "enqueue --kind KIND [--queue Q] [--payload JSON|-] [flags]",
		Short: "Enqueue a job",
		Example: `  spool enqueue --queue emails --kind welcome --payload '{"user":42}'
  echo '{"user":42}' | spool enqueue --kind welcome --payload - --delay 10m --tag signup
  spool enqueue --kind charge --id order-991 --unique-key order-991   # idempotent`,
		Args: noArgs,
	}
	cmd.Flags().StringVar(&id, "id", "", "job id, to make the enqueue idempotent (default: generated)")
	cmd.Flags().StringVar(&runAt, "run-at", "", "make the job available at this RFC 3339 time")
	jf := addJobFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := jf.params(c.stdin())
		if err != nil {
			return err
		}
		p.ID = id
		if runAt != "" {
			if p.RunAt, err = time.Parse(time.RFC3339Nano, runAt); err != nil {
				return fmt.Errorf("--run-at: %w", err)
			}
		}
		cl, ctx, done := c.connect()
		defer done()
		res, err := cl.Enqueue(ctx, p)
		if err != nil {
			return err
		}
		return c.show(res, func() {
			c.table([]string{"ID", "STATE", "DUPLICATE"}, [][]string{{res.ID, string(res.State), yesNo(res.Duplicate)}})
		})
	}
	return c.client(cmd, false)
}

func (c *cli) jobsCommand() *cobra.Command {
	return c.client(c.group(&cobra.Command{
		Use:   "jobs",
		Short: "List, get, cancel, retry or delete jobs; ack, fail and enqueue in one transaction",
		Example: `  spool jobs list --queue emails --state dead
  spool jobs get 01JD3Q5W8R2M --wait --timeout 5m
  spool jobs retry 01JD3Q5W8R2M`,
	}, c.jobsListCommand(), c.jobsGetCommand(), c.jobActionCommand("cancel"), c.jobActionCommand("retry"),
		c.jobsDeleteCommand(), c.jobsTransactCommand()), true)
}

func (c *cli) jobsListCommand() *cobra.Command {
	var p client.ListParams
	var state string
	cmd := &cobra.Command{
		Use:   "list [--queue Q] [--state S] [--worker W] [--limit N] [--cursor C]",
		Short: "List jobs, newest first, a page at a time",
		Example: `  spool jobs list --queue emails --state dead
  spool jobs list --worker host-1/pid-77          # the jobs one worker holds
  spool jobs list --limit 100 --cursor <cursor>   # the next page`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&p.Queue, "queue", "", "only this queue")
	fs.StringVar(&state, "state", "", "only this state: scheduled, available, active, retrying, completed, dead or cancelled")
	fs.StringVar(&p.Worker, "worker", "", "only the jobs this worker holds (state active, the default with --worker)")
	fs.IntVar(&p.Limit, "limit", 50, "jobs per page, 1 to 1000")
	fs.StringVar(&p.Cursor, "cursor", "", "continue from the cursor a previous page printed")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p.State = client.State(state)
		if p.Worker != "" && p.State == "" {
			p.State = client.StateActive // what a worker holds
		}
		cl, ctx, done := c.connect()
		defer done()
		page, err := cl.List(ctx, p)
		if err != nil {
			return err
		}
		return c.show(page, func() {
			rows := make([][]string, len(page.Jobs))
			for i, j := range page.Jobs {
				rows[i] = []string{j.ID, j.Queue, j.Kind, string(j.State), fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts),
					strconv.Itoa(j.Priority), shortTime(j.RunAt), shortTime(j.CreatedAt)}
			}
			c.table([]string{"ID", "QUEUE", "KIND", "STATE", "ATTEMPT", "PRIORITY", "RUN AT", "CREATED"}, rows)
			if page.NextCursor != "" {
				fmt.Fprintf(c.errOut, "more: --cursor %s\n", page.NextCursor)
			}
		})
	}
	return cmd
}

func (c *cli) jobsGetCommand() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:     "get ID",
		Aliases: []string{"show"},
		Short:   "Show one job: its state, attempts, payload, result, errors and worker",
		Example: `  spool jobs get 01JD3Q5W8R2M
  spool jobs get 01JD3Q5W8R2M --wait --timeout 5m --json   # block until it finishes`,
		Args: exactArgs(1, "ID"),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the job is completed, dead or cancelled (up to --timeout)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, ctx, done := c.connect()
		defer done()
		get := cl.Get
		if wait {
			get = cl.Await
		}
		j, err := get(ctx, args[0])
		if err != nil {
			return err
		}
		return c.show(j, func() { c.printJob(j) })
	}
	return cmd
}

// printJob writes a job as aligned "field value" lines.
func (c *cli) printJob(j *client.Job) {
	rows := [][]string{
		{"id", j.ID}, {"queue", j.Queue}, {"kind", j.Kind}, {"state", string(j.State)},
		{"attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts)}, {"priority", strconv.Itoa(j.Priority)},
		{"payload", string(j.Payload)}, {"run at", shortTime(j.RunAt)}, {"created", shortTime(j.CreatedAt)},
		{"durability", string(j.Durability)},
	}
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, []string{k, v})
		}
	}
	add("started", shortTime(j.StartedAt))
	add("finished", shortTime(j.FinishedAt))
	if j.Lease != nil {
		add("lease", fmt.Sprintf("token %d until %s", j.Lease.Token, shortTime(j.Lease.ExpiresAt)))
	}
	// The worker holds an active job; a finished one it ran last.
	if j.State == client.StateActive {
		add("worker", j.Worker)
	} else {
		add("last worker", j.Worker)
	}
	if j.CancelRequested {
		add("cancel", "requested")
	}
	add("unique key", j.UniqueKey)
	add("tags", strings.Join(j.Tags, ", "))
	add("group", j.Group)
	add("traceparent", j.TraceParent)
	if d := j.DeadLetterOf; d != nil {
		add("dead letter of", d.Queue+" "+d.ID)
	}
	add("progress", string(j.Progress))
	add("result", string(j.Result))
	for i, e := range j.Errors {
		rows = append(rows, []string{fmt.Sprintf("error %d", e.Attempt), shortTime(e.At) + "  " + e.Message})
		if i == 0 && j.ErrorsDropped > 0 {
			rows = append(rows, []string{"errors dropped", fmt.Sprint(j.ErrorsDropped)})
		}
	}
	tw := make([][]string, len(rows))
	for i, r := range rows {
		tw[i] = []string{r[0] + ":", r[1]}
	}
	c.table([]string{"FIELD", "VALUE"}, tw)
}

// jobActionCommand is cancel or retry of one job.
func (c *cli) jobActionCommand(action string) *cobra.Command {
	short := map[string]string{
		"cancel": "Cancel a job: at once if it waits, at its worker's next call if it runs",
		"retry":  "Make a dead, cancelled, retrying or scheduled job available now",
	}[action]
	return &cobra.Command{
		Use:     action + " ID",
		Short:   short,
		Example: "  spool jobs " + action + " 01JD3Q5W8R2M",
		Args:    exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			act := cl.Retry
			if action == "cancel" {
				act = cl.Cancel
			}
			j, err := act(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(j, func() {
				c.table([]string{"ID", "STATE", "CANCEL REQUESTED"}, [][]string{{j.ID, string(j.State), yesNo(j.CancelRequested)}})
			})
		},
	}
}

func (c *cli) jobsDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete ID",
		Short:   "Delete a job that is not active",
		Example: "  spool jobs delete 01JD3Q5W8R2M",
		Args:    exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			if err := cl.Delete(ctx, args[0]); err != nil {
				return err
			}
			return c.show(map[string]any{"id": args[0], "deleted": true}, func() { fmt.Fprintf(c.out, "deleted %s\n", args[0]) })
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
