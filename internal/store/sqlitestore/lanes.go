package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/spoolq/spool/internal/job"
)

// Consumer groups in the embedded store (see store.ConsumerGroups): the
// writer keeps every queue's groups in memory, read at open and after a
// rollback, so an insert into a queue with groups inserts their copies in
// the same operation. Their operations are in consumergroups.go.

// laneSet holds the consumer groups of every queue that has some, each
// queue's names in byte order.
type laneSet map[string][]string

// loadLanes reads every queue's consumer groups on conn.
func loadLanes(conn *sql.Conn) (laneSet, error) {
	rows, err := conn.QueryContext(context.Background(), `SELECT queue, name FROM consumer_groups ORDER BY queue, name`)
	found, err := scanAll(rows, err, func(r *sql.Rows, v *[2]string) error { return r.Scan(&v[0], &v[1]) })
	if err != nil {
		return nil, fmt.Errorf("read consumer groups: %w", err)
	}
	ls := laneSet{}
	for _, v := range found {
		ls[v[0]] = append(ls[v[0]], v[1])
	}
	return ls, nil
}

// has reports whether queue has consumer group name.
func (ls laneSet) has(queue, name string) bool {
	return slices.Contains(ls[queue], name)
}

// add gives queue the consumer group name.
func (ls laneSet) add(queue, name string) {
	ls[queue] = append(ls[queue], name)
	slices.Sort(ls[queue])
}

// remove takes consumer group name from queue.
func (ls laneSet) remove(queue, name string) {
	ls[queue] = slices.DeleteFunc(ls[queue], func(g string) bool { return g == name })
}

// lanesOf returns the lanes (job.LaneName) of queue's consumer groups.
func (ls laneSet) lanesOf(queue string) []string {
	out := make([]string, len(ls[queue]))
	for i, g := range ls[queue] {
		out[i] = job.LaneName(queue, g)
	}
	return out
}
