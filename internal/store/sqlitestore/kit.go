package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/spoolq/spool/internal/store/sqlkit"
)

// dialect spells the shared statements of package sqlkit in SQLite.
var dialect = sqlkit.Dialect{
	Param:    "?",
	Nanos:    true,
	False:    "0",
	Bytewise: "BINARY",
	Hints:    true,
	In:       "IN (SELECT value FROM json_each($1))",
	List: func(names []string) any {
		list, _ := json.Marshal(names) // a []string always encodes
		return string(list)
	},
}

// kitDB runs the statements of package sqlkit on the store: reads on the
// read pool, writes as operations of the writer.
type kitDB struct{ s *Store }

func (k kitDB) Read() (sqlkit.Conn, error) {
	if err := k.s.check(); err != nil {
		return nil, err
	}
	return kitConn{db: k.s.rdb}, nil
}

func (k kitDB) Write(ctx context.Context, weight int, fn func(sqlkit.Conn) error) error {
	return k.s.do(ctx, weight, func(w *writer) error { return fn(kitConn{db: w.conn, w: w}) })
}

func (k kitDB) WriteAlone(ctx context.Context, fn func(sqlkit.Conn) error) error {
	return k.Write(ctx, 1, fn)
}

func (kitDB) Wrap(what string, err error) error { return wrap(what, err) }

// kitConn is the read pool, or, with w set, the writer's connection in
// its batch's transaction, whose statements run under no caller's
// context, as every statement of a batch does.
type kitConn struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
	w *writer
}

func (c kitConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if c.w != nil {
		ctx = context.Background()
	}
	res, err := c.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c kitConn) Query(ctx context.Context, query string, args []any, scan func(sqlkit.Row) error) error {
	if c.w != nil {
		ctx = context.Background()
	}
	rows, err := c.db.QueryContext(ctx, query, args...)
	_, err = scanAll(rows, err, func(r *sql.Rows, _ *struct{}) error { return scan(r) })
	return err
}
