package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Consumer groups in the embedded store (see store.ConsumerGroups). The
// writer keeps the groups of every queue in memory (a laneSet), read at
// open and after a rollback; an insert into a queue with groups inserts
// the copies in the same operation, so one commit holds a job and its
// copies. A lane is a queue of its own: its jobs are claimed, finished and
// pruned like any other's. The groups' operations are in
// consumergroups.go.

// laneGroup is a consumer group as the writer keeps it.
type laneGroup struct {
	name      string
	createdAt time.Time
}

// laneSet holds the consumer groups of every queue that has some, each
// queue's by name.
type laneSet map[string][]laneGroup

// loadLanes reads every queue's consumer groups on conn.
func loadLanes(conn *sql.Conn) (laneSet, error) {
	type row struct {
		queue string
		g     laneGroup
	}
	rows, err := conn.QueryContext(context.Background(), `SELECT queue, name, created_at FROM consumer_groups ORDER BY queue, name`)
	found, err := scanAll(rows, err, func(r *sql.Rows, v *row) error {
		var created int64
		err := r.Scan(&v.queue, &v.g.name, &created)
		v.g.createdAt = fromNanos(created)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read consumer groups: %w", err)
	}
	ls := laneSet{}
	for _, v := range found {
		ls[v.queue] = append(ls[v.queue], v.g)
	}
	return ls, nil
}

// has reports whether queue has consumer group name.
func (ls laneSet) has(queue, name string) bool {
	return slices.ContainsFunc(ls[queue], func(g laneGroup) bool { return g.name == name })
}

// add gives queue the consumer group g.
func (ls laneSet) add(queue string, g laneGroup) {
	ls[queue] = append(ls[queue], g)
	slices.SortFunc(ls[queue], func(a, b laneGroup) int { return strings.Compare(a.name, b.name) })
}

// remove takes consumer group name from queue.
func (ls laneSet) remove(queue, name string) {
	ls[queue] = slices.DeleteFunc(ls[queue], func(g laneGroup) bool { return g.name == name })
}

// lanesOf returns the lanes (job.LaneName) of queue's consumer groups.
func (ls laneSet) lanesOf(queue string) []string {
	out := make([]string, len(ls[queue]))
	for i, g := range ls[queue] {
		out[i] = job.LaneName(queue, g.name)
	}
	return out
}
