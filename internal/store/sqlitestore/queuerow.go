package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/spoolq/spool/internal/store/adminkit"
)

// queueRow is a queue as its row in the queues table stores it: limits
// and settings in their JSON form (a setting added later needs no new
// column, and rows written before it read it as unset), grouped once its
// jobs have groups (see queues.go).
type queueRow struct {
	adminkit.Queue
	name    string
	grouped bool
}

// readQueues reads every row of the queues table.
func readQueues(ctx context.Context, conn *sql.Conn) ([]queueRow, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, paused, durability, limits, grouped, settings FROM queues`)
	qs, err := scanAll(rows, err, func(r *sql.Rows, q *queueRow) error {
		var limits, settings []byte
		err := r.Scan(&q.name, &q.Paused, &q.Durability, &limits, &q.grouped, &settings)
		if err == nil {
			err = decodeJSON(limits, &q.Limits)
		}
		if err == nil {
			err = decodeJSON(settings, &q.Settings)
		}
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.name, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	return qs, nil
}

// encodeJSON is the stored form of v, a queue's limits or settings: their
// JSON form, NULL when zero.
func encodeJSON(v any, zero bool) (any, error) {
	if zero {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// decodeJSON reads encodeJSON's form into v; NULL leaves it zero.
func decodeJSON(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}
