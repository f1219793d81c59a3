package main

import (
	"strconv"

	"github.com/spf13/cobra"
)

// workersCommand lists the workers the server has seen fetch.
func (c *cli) workersCommand() *cobra.Command {
	return c.client(&cobra.Command{
		Use:     "workers",
		Short:   "List the workers the server has seen fetch, with the jobs each holds",
		Example: "  spool workers\n  spool jobs list --worker host-1/pid-77   # what one of them holds",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, done := c.connect()
			defer done()
			ws, err := cl.Workers(ctx)
			if err != nil {
				return err
			}
			return c.show(map[string]any{"workers": ws}, func() {
				rows := make([][]string, len(ws))
				for i, w := range ws {
					rows[i] = []string{w.Name, strconv.Itoa(w.Active), shortTime(w.FirstSeenAt), shortTime(w.LastSeenAt)}
				}
				c.table([]string{"WORKER", "ACTIVE", "FIRST SEEN", "LAST SEEN"}, rows)
			})
		},
	}, false)
}
