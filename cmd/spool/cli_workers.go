package main

import (
	"strconv"
)

// workers lists the workers the server has seen fetch.
func (c *cli) workers(args []string) int {
	fs, cm := c.flags("workers", "workers")
	_, code, ok := parse(fs, args, 0)
	if !ok {
		return code
	}
	cl, ctx, done := cm.connect()
	defer done()
	ws, err := cl.Workers(ctx)
	if err != nil {
		return c.report("workers", err)
	}
	if cm.asJSON {
		return c.printJSON(map[string]any{"workers": ws})
	}
	rows := make([][]string, len(ws))
	for i, w := range ws {
		rows[i] = []string{w.Name, strconv.Itoa(w.Active), shortTime(w.FirstSeenAt), shortTime(w.LastSeenAt)}
	}
	c.table([]string{"WORKER", "ACTIVE", "FIRST SEEN", "LAST SEEN"}, rows)
	return 0
}
