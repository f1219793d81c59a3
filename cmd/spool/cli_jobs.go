package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/client"
)

// listFlag collects a repeatable flag; commas also separate values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

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
func addJobFlags(fs *flag.FlagSet) *jobFlags {
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
	fs.Var(&f.tags, "tag", "tag (repeatable)")
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

func (c *cli) enqueue(args []string) int {
	fs, cm := c.flags("enqueue", "enqueue --kind KIND [--queue Q] [--payload JSON|-] [flags]")
	var id, runAt string
	fs.StringVar(&id, "id", "", "job id, to make the enqueue idempotent (default: generated)")
	fs.StringVar(&runAt, "run-at", "", "make the job available at this RFC 3339 time")
	jf := addJobFlags(fs)
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	p, err := jf.params(c.stdin())
	if err != nil {
		return c.report("enqueue", err)
	}
	p.ID = id
	if runAt != "" {
		if p.RunAt, err = time.Parse(time.RFC3339Nano, runAt); err != nil {
			return c.report("enqueue", fmt.Errorf("--run-at: %w", err))
		}
	}
	cl, ctx, done := cm.connect()
	defer done()
	res, err := cl.Enqueue(ctx, p)
	if err != nil {
		return c.report("enqueue", err)
	}
	if cm.asJSON {
		return c.printJSON(res)
	}
	c.table([]string{"ID", "STATE", "DUPLICATE"}, [][]string{{res.ID, string(res.State), yesNo(res.Duplicate)}})
	return 0
}

func (c *cli) jobs(args []string) int {
	return c.sub("jobs", args, map[string]func([]string) int{
		"list":     c.jobsList,
		"get":      c.jobsGet,
		"cancel":   func(a []string) int { return c.jobAction("cancel", a) },
		"retry":    func(a []string) int { return c.jobAction("retry", a) },
		"delete":   c.jobsDelete,
		"transact": c.jobsTransact,
	}, "list|get|cancel|retry|delete|transact")
}

func (c *cli) jobsList(args []string) int {
	fs, cm := c.flags("jobs list", "jobs list [--queue Q] [--state S] [--worker W] [--limit N] [--cursor C]")
	var p client.ListParams
	var state string
	fs.StringVar(&p.Queue, "queue", "", "only this queue")
	fs.StringVar(&state, "state", "", "only this state: scheduled, available, active, retrying, completed, dead or cancelled")
	fs.StringVar(&p.Worker, "worker", "", "only the jobs this worker holds (state active, the default with --worker)")
	fs.IntVar(&p.Limit, "limit", 50, "jobs per page, 1 to 1000")
	fs.StringVar(&p.Cursor, "cursor", "", "continue from the cursor a previous page printed")
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	p.State = client.State(state)
	if p.Worker != "" && p.State == "" {
		p.State = client.StateActive // what a worker holds
	}
	cl, ctx, done := cm.connect()
	defer done()
	page, err := cl.List(ctx, p)
	if err != nil {
		return c.report("jobs list", err)
	}
	if cm.asJSON {
		return c.printJSON(page)
	}
	rows := make([][]string, len(page.Jobs))
	for i, j := range page.Jobs {
		rows[i] = []string{j.ID, j.Queue, j.Kind, string(j.State), fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts),
			strconv.Itoa(j.Priority), shortTime(j.RunAt), shortTime(j.CreatedAt)}
	}
	c.table([]string{"ID", "QUEUE", "KIND", "STATE", "ATTEMPT", "PRIORITY", "RUN AT", "CREATED"}, rows)
	if page.NextCursor != "" {
		fmt.Fprintf(c.errOut, "more: --cursor %s\n", page.NextCursor)
	}
	return 0
}

func (c *cli) jobsGet(args []string) int {
	fs, cm := c.flags("jobs get", "jobs get ID")
	wait := fs.Bool("wait", false, "wait until the job is completed, dead or cancelled (up to --timeout)")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	get := cl.Get
	if *wait {
		get = cl.Await
	}
	j, err := get(ctx, pos[0])
	if err != nil {
		return c.report("jobs get", err)
	}
	if cm.asJSON {
		return c.printJSON(j)
	}
	c.printJob(j)
	return 0
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

// jobAction runs cancel or retry on one job.
func (c *cli) jobAction(action string, args []string) int {
	fs, cm := c.flags("jobs "+action, "jobs "+action+" ID")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	var j *client.Job
	var err error
	if action == "cancel" {
		j, err = cl.Cancel(ctx, pos[0])
	} else {
		j, err = cl.Retry(ctx, pos[0])
	}
	if err != nil {
		return c.report("jobs "+action, err)
	}
	if cm.asJSON {
		return c.printJSON(j)
	}
	c.table([]string{"ID", "STATE", "CANCEL REQUESTED"}, [][]string{{j.ID, string(j.State), yesNo(j.CancelRequested)}})
	return 0
}

func (c *cli) jobsDelete(args []string) int {
	fs, cm := c.flags("jobs delete", "jobs delete ID")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	if err := cl.Delete(ctx, pos[0]); err != nil {
		return c.report("jobs delete", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"id": pos[0], "deleted": true})
	}
	fmt.Fprintf(c.out, "deleted %s\n", pos[0])
	return 0
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
