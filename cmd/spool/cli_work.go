package main

import (
	"fmt"
	"strconv"

	"github.com/spoolq/spool/client"
)

func (c *cli) fetch(args []string) int {
	fs, cm := c.flags("fetch", "fetch --queue Q [--queue Q2] [--max N] [--wait D] [--lease D] [--consumer-group NAME] [--group G]")
	var p client.FetchParams
	var queues listFlag
	fs.Var(&queues, "queue", "queue to take jobs from (repeatable; required)")
	fs.IntVar(&p.Max, "max", 1, "most jobs to lease, 1 to 1000")
	fs.DurationVar(&p.Wait, "wait", 0, "long-poll up to this long (at most 60s) when no job is available")
	fs.DurationVar(&p.Lease, "lease", 0, "lease of each job (default: each job's own)")
	fs.StringVar(&p.Worker, "worker", "spool-cli", "worker name for display")
	fs.StringVar(&p.ConsumerGroup, "consumer-group", "", "take the jobs of this consumer group of the queues")
	fs.StringVar(&p.Group, "group", "", "take only the jobs of this group: a tenant, or one group of an ordered queue, whose jobs run in order")
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	if len(queues) == 0 {
		fmt.Fprintln(c.errOut, "spool fetch: --queue is required")
		return 2
	}
	p.Queues = queues
	cl, ctx, done := cm.connect()
	defer done()
	jobs, err := cl.Fetch(ctx, p)
	if err != nil {
		return c.report("fetch", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"jobs": jobs})
	}
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = []string{j.ID, j.Queue, j.Kind, strconv.Itoa(j.Attempt), strconv.FormatInt(j.Token(), 10), string(j.Payload)}
	}
	c.table([]string{"ID", "QUEUE", "KIND", "ATTEMPT", "TOKEN", "PAYLOAD"}, rows)
	return 0
}

func (c *cli) ackJob(args []string) int {
	fs, cm := c.flags("ack", "ack ID --token N [--result JSON|-]")
	token := fs.Int64("token", 0, "the lease token from the fetch (required)")
	result := fs.String("result", "", "result as JSON, or - to read it from standard input")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	raw, err := jsonArg(*result, c.stdin())
	if err != nil {
		return c.report("ack", fmt.Errorf("--result: %w", err))
	}
	var res any
	if raw != nil {
		res = raw
	}
	cl, ctx, done := cm.connect()
	defer done()
	out, err := cl.Ack(ctx, pos[0], *token, res)
	if err != nil {
		return c.report("ack", err)
	}
	if cm.asJSON {
		return c.printJSON(out)
	}
	c.table([]string{"ID", "STATE"}, [][]string{{out.ID, string(out.State)}})
	return 0
}

func (c *cli) failJob(args []string) int {
	fs, cm := c.flags("fail", "fail ID --token N --error TEXT [--no-retry] [--retry-after D]")
	token := fs.Int64("token", 0, "the lease token from the fetch (required)")
	var p client.FailParams
	fs.StringVar(&p.Error, "error", "", "why the attempt failed")
	fs.BoolVar(&p.NoRetry, "no-retry", false, "send the job to dead whatever attempts it has left")
	fs.DurationVar(&p.RetryAfter, "retry-after", 0, "retry after this long instead of the job's backoff")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	out, err := cl.Fail(ctx, pos[0], *token, p)
	if err != nil {
		return c.report("fail", err)
	}
	if cm.asJSON {
		return c.printJSON(out)
	}
	c.table([]string{"ID", "STATE", "RUN AT"}, [][]string{{out.ID, string(out.State), shortTime(out.RunAt)}})
	return 0
}
