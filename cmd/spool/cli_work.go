package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/client"
)

func (c *cli) fetchCommand() *cobra.Command {
	var p client.FetchParams
	var queues listFlag
	cmd := &cobra.Command{
		Use:   "fetch --queue Q [--queue Q2] [--max N] [--wait D] [--lease D] [--consumer-group NAME] [--group G] [--runs] [--max-groups N]",
		Short: "Lease jobs as a worker would, to ack or fail them by hand",
		Example: `  spool fetch --queue emails --max 5 --wait 30s
  spool fetch --queue orders --consumer-group billing --json`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.Var(&queues, "queue", "queue to take jobs from (repeatable; required)")
	fs.IntVar(&p.Max, "max", 1, "most jobs to lease, 1 to 1000")
	fs.DurationVar(&p.Wait, "wait", 0, "long-poll up to this long (at most 60s) when no job is available")
	fs.DurationVar(&p.Lease, "lease", 0, "lease of each job (default: each job's own)")
	fs.StringVar(&p.Worker, "worker", "spool-cli", "worker name for display")
	fs.StringVar(&p.ConsumerGroup, "consumer-group", "", "take the jobs of this consumer group of the queues")
	fs.StringVar(&p.Group, "group", "", "take only the jobs of this group: a tenant, or one group of an ordered queue, whose jobs run in order")
	fs.BoolVar(&p.Runs, "runs", false, "let a free group of an ordered queue hand out a run of its jobs, in order, instead of one")
	fs.IntVar(&p.MaxGroups, "max-groups", 0, "take the jobs of at most this many groups of each queue, 1 to 1000; with --runs, 1 takes one group's run (default any)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(queues) == 0 {
			return usagef("--queue is required")
		}
		if fs.Changed("max-groups") && p.MaxGroups < 1 {
			return usagef("--max-groups must be at least 1")
		}
		p.Queues = queues
		cl, ctx, done := c.connect()
		defer done()
		jobs, err := cl.Fetch(ctx, p)
		if err != nil {
			return err
		}
		return c.show(map[string]any{"jobs": jobs}, func() {
			rows := make([][]string, len(jobs))
			for i, j := range jobs {
				rows[i] = []string{j.ID, j.Queue, j.Kind, strconv.Itoa(j.Attempt), strconv.FormatInt(j.Token(), 10), string(j.Payload)}
			}
			c.table([]string{"ID", "QUEUE", "KIND", "ATTEMPT", "TOKEN", "PAYLOAD"}, rows)
		})
	}
	return c.client(cmd, false)
}

func (c *cli) ackCommand() *cobra.Command {
	var token int64
	var result string
	cmd := &cobra.Command{
		Use:     "ack ID --token N [--result JSON|-]",
		Short:   "Finish a leased job as completed",
		Example: `  spool ack 01JD3Q5W8R2M --token 7 --result '{"sent":true}'`,
		Args:    exactArgs(1, "ID"),
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the lease token from the fetch (required)")
	cmd.Flags().StringVar(&result, "result", "", "result as JSON, or - to read it from standard input")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		raw, err := jsonArg(result, c.stdin())
		if err != nil {
			return fmt.Errorf("--result: %w", err)
		}
		var res any
		if raw != nil {
			res = raw
		}
		cl, ctx, done := c.connect()
		defer done()
		out, err := cl.Ack(ctx, args[0], token, res)
		if err != nil {
			return err
		}
		return c.show(out, func() { c.table([]string{"ID", "STATE"}, [][]string{{out.ID, string(out.State)}}) })
	}
	return c.client(cmd, false)
}

func (c *cli) failCommand() *cobra.Command {
	var token int64
	var p client.FailParams
	cmd := &cobra.Command{
		Use:   "fail ID --token N --error TEXT [--no-retry] [--retry-after D]",
		Short: "Finish a leased job's attempt as failed: it retries after its backoff, or dies",
		Example: `  spool fail 01JD3Q5W8R2M --token 7 --error "smtp: 451 try later" --retry-after 1m
  spool fail 01JD3Q5W8R2M --token 7 --error "card declined" --no-retry`,
		Args: exactArgs(1, "ID"),
	}
	fs := cmd.Flags()
	fs.Int64Var(&token, "token", 0, "the lease token from the fetch (required)")
	fs.StringVar(&p.Error, "error", "", "why the attempt failed")
	fs.BoolVar(&p.NoRetry, "no-retry", false, "send the job to dead whatever attempts it has left")
	fs.DurationVar(&p.RetryAfter, "retry-after", 0, "retry after this long instead of the job's backoff")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, ctx, done := c.connect()
		defer done()
		out, err := cl.Fail(ctx, args[0], token, p)
		if err != nil {
			return err
		}
		return c.show(out, func() {
			c.table([]string{"ID", "STATE", "RUN AT"}, [][]string{{out.ID, string(out.State), shortTime(out.RunAt)}})
		})
	}
	return c.client(cmd, false)
}
