package main

import (
	"fmt"
	"strconv"

	"github.com/spoolq/spool/client"
)

func (c *cli) queues(args []string) int {
	return c.sub("queues", args, map[string]func([]string) int{
		"list":        c.queuesList,
		"get":         func(a []string) int { return c.queueAction("get", a) },
		"pause":       func(a []string) int { return c.queueAction("pause", a) },
		"resume":      func(a []string) int { return c.queueAction("resume", a) },
		"durability":  c.queuesDurability,
		"purge":       c.queuesPurge,
		"retry":       func(a []string) int { return c.queueBulk("retry", a) },
		"delete-jobs": func(a []string) int { return c.queueBulk("delete-jobs", a) },
	}, "list|get|pause|resume|durability|purge|retry|delete-jobs")
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

// printQueues writes queues as a table with their counts.
func (c *cli) printQueues(qs ...client.Queue) {
	rows := make([][]string, len(qs))
	for i, q := range qs {
		n := q.Counts
		rows[i] = []string{q.Name, yesNo(q.Paused), string(q.Durability)}
		for _, v := range []int{n.Scheduled, n.Available, n.Active, n.Retrying, n.Completed, n.Dead, n.Cancelled} {
			rows[i] = append(rows[i], strconv.Itoa(v))
		}
	}
	c.table([]string{"QUEUE", "PAUSED", "DURABILITY", "SCHEDULED", "AVAILABLE", "ACTIVE", "RETRYING", "COMPLETED", "DEAD", "CANCELLED"}, rows)
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
