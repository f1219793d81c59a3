package pgstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// clock follows the database server's clock: the local clock plus an
// offset measured against clock_timestamp(). Every node that shares the
// database measures its own offset, so their leases, run times and
// retention agree however far their own clocks drift.
type clock struct {
	offset atomic.Int64 // nanoseconds to add to the local clock
}

func (c *clock) now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC()
}

// clockSamples is how many round trips one measurement takes; the one
// with the shortest round trip wins, since its midpoint is the closest.
const clockSamples = 3

// measure sets the offset from a few round trips on conn: the database's
// time minus the local time at the middle of the fastest round trip.
func (c *clock) measure(ctx context.Context, conn *pgx.Conn) error {
	best := time.Duration(-1)
	var offset time.Duration
	for range clockSamples {
		var db time.Time
		before := time.Now()
		if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
			return mapErr(err)
		}
		rtt := time.Since(before)
		if best < 0 || rtt < best {
			best = rtt
			offset = db.Sub(before.Add(rtt / 2))
		}
	}
	c.offset.Store(int64(offset))
	return nil
}
