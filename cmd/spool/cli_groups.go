package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spoolq/spool/client"
)

// consumerGroups creates, lists, moves and deletes the consumer groups of
// a queue.
func (c *cli) consumerGroups(args []string) int {
	return c.sub("consumer-groups", args, map[string]func([]string) int{
		"list":   c.groupsList,
		"get":    func(a []string) int { return c.groupsOne("get", a) },
		"create": func(a []string) int { return c.groupsMove("create", a) },
		"seek":   func(a []string) int { return c.groupsMove("seek", a) },
		"delete": func(a []string) int { return c.groupsOne("delete", a) },
	}, "list|get|create|seek|delete")
}

func (c *cli) groupsList(args []string) int {
	fs, cm := c.flags("consumer-groups list", "consumer-groups list QUEUE")
	pos, code, ok := parse(fs, args, 1)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	gs, err := cl.ConsumerGroups(ctx, pos[0])
	if err != nil {
		return c.report("consumer-groups list", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"consumer_groups": gs})
	}
	c.printGroups(gs...)
	return 0
}

// groupsOne gets or deletes one consumer group.
func (c *cli) groupsOne(action string, args []string) int {
	fs, cm := c.flags("consumer-groups "+action, "consumer-groups "+action+" QUEUE GROUP")
	pos, code, ok := parse(fs, args, 2)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	if action == "delete" {
		if err := cl.DeleteConsumerGroup(ctx, pos[0], pos[1]); err != nil {
			return c.report("consumer-groups delete", err)
		}
		if cm.asJSON {
			return c.printJSON(map[string]any{"deleted": pos[1]})
		}
		fmt.Fprintf(c.out, "deleted consumer group %s of %s\n", pos[1], pos[0])
		return 0
	}
	g, err := cl.ConsumerGroup(ctx, pos[0], pos[1])
	if err != nil {
		return c.report("consumer-groups get", err)
	}
	if cm.asJSON {
		return c.printJSON(g)
	}
	c.printGroups(*g)
	return 0
}

// groupsMove creates a consumer group or moves one, to --from.
func (c *cli) groupsMove(action string, args []string) int {
	fs, cm := c.flags("consumer-groups "+action, "consumer-groups "+action+" QUEUE GROUP [--from beginning|new|TIME]")
	from := fs.String("from", "beginning", "where the consumer group starts: beginning (every job the queue holds), new (jobs enqueued from now on) or an RFC 3339 time")
	pos, code, ok := parse(fs, args, 2)
	if !ok {
		return code
	}
	var start client.GroupStart
	switch *from {
	case "beginning":
		start = client.FromBeginning
	case "new":
		start = client.FromNew
	default:
		t, err := time.Parse(time.RFC3339Nano, *from)
		if err != nil {
			fmt.Fprintf(c.errOut, "spool consumer-groups %s: --from must be beginning, new or an RFC 3339 time such as 2026-11-24T09:00:00Z\n", action)
			return 2
		}
		start = client.FromTime(t)
	}
	cl, ctx, done := cm.connect()
	defer done()
	var g *client.ConsumerGroup
	var err error
	if action == "create" {
		g, _, err = cl.CreateConsumerGroup(ctx, pos[0], pos[1], start)
	} else {
		g, err = cl.SeekConsumerGroup(ctx, pos[0], pos[1], start)
	}
	if err != nil {
		return c.report("consumer-groups "+action, err)
	}
	if cm.asJSON {
		return c.printJSON(g)
	}
	c.printGroups(*g)
	return 0
}

// printGroups writes groups as a table.
func (c *cli) printGroups(gs ...client.ConsumerGroup) {
	rows := make([][]string, len(gs))
	for i, g := range gs {
		rows[i] = []string{g.Queue, g.Name, strconv.FormatInt(g.Pending, 10), strconv.Itoa(g.Counts.Active),
			strconv.Itoa(g.Counts.Completed), strconv.Itoa(g.Counts.Dead), g.Lag().Round(time.Millisecond).String()}
	}
	c.table([]string{"QUEUE", "GROUP", "PENDING", "ACTIVE", "COMPLETED", "DEAD", "LAG"}, rows)
}
