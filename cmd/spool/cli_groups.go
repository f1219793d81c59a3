package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/client"
)

// consumerGroupsCommand creates, lists, moves and deletes the consumer
// groups of a queue.
func (c *cli) consumerGroupsCommand() *cobra.Command {
	return c.client(c.group(&cobra.Command{
		Use:   "consumer-groups",
		Short: "List, get, create, seek or delete the consumer groups of a queue",
		Example: `  spool consumer-groups create orders billing --from new
  spool consumer-groups list orders
  spool fetch --queue orders --consumer-group billing`,
	}, c.groupsListCommand(), c.groupsOneCommand("get"), c.groupsMoveCommand("create"), c.groupsMoveCommand("seek"),
		c.groupsOneCommand("delete")), true)
}

func (c *cli) groupsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list QUEUE",
		Short:   "List the consumer groups of a queue with their pending jobs and lag",
		Example: "  spool consumer-groups list orders",
		Args:    exactArgs(1, "QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			gs, err := cl.ConsumerGroups(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(map[string]any{"consumer_groups": gs}, func() { c.printGroups(gs...) })
		},
	}
}

// groupsOneCommand gets or deletes one consumer group.
func (c *cli) groupsOneCommand(action string) *cobra.Command {
	short := map[string]string{"get": "Show one consumer group of a queue",
		"delete": "Delete a consumer group of a queue with what it kept per job"}[action]
	return &cobra.Command{
		Use:     action + " QUEUE GROUP",
		Aliases: map[string][]string{"get": {"show"}}[action],
		Short:   short,
		Example: "  spool consumer-groups " + action + " orders billing",
		Args:    exactArgs(2, "QUEUE and GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			if action == "delete" {
				if err := cl.DeleteConsumerGroup(ctx, args[0], args[1]); err != nil {
					return err
				}
				return c.show(map[string]any{"deleted": args[1]}, func() {
					fmt.Fprintf(c.out, "deleted consumer group %s of %s\n", args[1], args[0])
				})
			}
			g, err := cl.ConsumerGroup(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			return c.show(g, func() { c.printGroups(*g) })
		},
	}
}

// groupsMoveCommand creates a consumer group or moves one, to --from.
func (c *cli) groupsMoveCommand(action string) *cobra.Command {
	var from string
	short := map[string]string{"create": "Create a consumer group of a queue, starting where --from says",
		"seek": "Move a consumer group to where --from says, to replay or skip jobs"}[action]
	cmd := &cobra.Command{
		Use:   action + " QUEUE GROUP [--from beginning|new|TIME]",
		Short: short,
		Example: fmt.Sprintf("  spool consumer-groups %s orders billing --from new\n"+
			"  spool consumer-groups %s orders audit --from 2026-11-24T09:00:00Z", action, action),
		Args: exactArgs(2, "QUEUE and GROUP"),
	}
	cmd.Flags().StringVar(&from, "from", "beginning", "where the consumer group starts: beginning (every job the queue holds), new (jobs enqueued from now on) or an RFC 3339 time")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var start client.GroupStart
		switch from {
		case "beginning":
			start = client.FromBeginning
		case "new":
			start = client.FromNew
		default:
			t, err := time.Parse(time.RFC3339Nano, from)
			if err != nil {
				return usagef("--from must be beginning, new or an RFC 3339 time such as 2026-11-24T09:00:00Z")
			}
			start = client.FromTime(t)
		}
		cl, ctx, done := c.connect()
		defer done()
		var g *client.ConsumerGroup
		var err error
		if action == "create" {
			g, _, err = cl.CreateConsumerGroup(ctx, args[0], args[1], start)
		} else {
			g, err = cl.SeekConsumerGroup(ctx, args[0], args[1], start)
		}
		if err != nil {
			return err
		}
		return c.show(g, func() { c.printGroups(*g) })
	}
	return cmd
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
