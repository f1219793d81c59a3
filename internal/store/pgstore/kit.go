package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/internal/store/sqlkit"
)

// dialect spells the shared statements of package sqlkit in PostgreSQL.
// Its Lock is an advisory lock of the schema, taken by the writes that
// must not run at once on two nodes.
var dialect = sqlkit.Dialect{
	Prefix:    "spool_",
	Param:     "$",
	False:     "false",
	Bytewise:  `"C"`,
	In:        "= ANY($1::text[])",
	List:      func(names []string) any { return names },
	ForUpdate: " FOR UPDATE",
	Lock:      fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d, hashtext(current_schema() || ':' || $1 || ':' || $2))`, lockClass),
}

// kitDB runs the statements of package sqlkit on the store: reads and
// lone statements on the pool, writes in a transaction.
type kitDB struct{ *db }

func (k kitDB) Read() (sqlkit.Conn, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	return kitConn{k.pool}, nil
}

func (k kitDB) Write(ctx context.Context, _ int, fn func(sqlkit.Conn) error) error {
	return k.tx(ctx, func(tx pgx.Tx) error { return fn(kitConn{tx}) })
}

func (k kitDB) WriteAlone(ctx context.Context, fn func(sqlkit.Conn) error) error {
	return k.retry(ctx, func() error { return fn(kitConn{k.pool}) })
}

func (kitDB) Wrap(what string, err error) error { return wrap(what, err) }

// kitConn is the pool or a transaction. A query goes out as a batch, so
// that it takes the BEGIN of a transaction along in its round trip.
type kitConn struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
}

func (c kitConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (c kitConn) Query(ctx context.Context, query string, args []any, scan func(sqlkit.Row) error) error {
	b := &pgx.Batch{}
	b.Queue(query, args...)
	br := c.q.SendBatch(ctx, b)
	rows, err := br.Query()
	if err == nil {
		for err == nil && rows.Next() {
			err = scan(rows)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}
