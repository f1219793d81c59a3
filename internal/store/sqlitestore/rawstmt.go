package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// rawStmt is a statement prepared on the write connection's driver
// connection and run without database/sql in between. The multi-row
// statements of the hot paths carry hundreds of arguments, and
// database/sql converts each into a freshly allocated slice on every call:
// the largest source of garbage in a batch enqueue. A rawStmt reuses one
// slice. It is used inside (*sql.Conn).Raw only, so database/sql's
// ownership of the connection is kept.
type rawStmt struct {
	conn *sql.Conn
	st   driver.StmtExecContext
	args []driver.NamedValue

	// run is the callback given to Raw, made once so that an exec
	// allocates nothing for it; rows and err carry its outcome.
	run  func(any) error
	rows int64
}

// prepareRaw prepares query on conn's driver connection.
func prepareRaw(ctx context.Context, conn *sql.Conn, query string) (*rawStmt, error) {
	r := &rawStmt{conn: conn}
	err := conn.Raw(func(dc any) error {
		pc, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		st, err := pc.PrepareContext(ctx, query)
		if err != nil {
			return err
		}
		ec, ok := st.(driver.StmtExecContext)
		if !ok {
			_ = st.Close()
			return fmt.Errorf("driver statement %T cannot execute with a context", st)
		}
		r.st = ec
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.run = r.execLocked
	return r, nil
}

// exec runs the statement with args, which must be values the driver
// takes as they are (int64, float64, bool, []byte, string, time.Time or
// nil) or ints, and returns the number of rows it changed.
func (r *rawStmt) exec(args []any) (int64, error) {
	r.args = r.args[:0]
	for i, a := range args {
		if n, ok := a.(int); ok {
			a = int64(n)
		}
		r.args = append(r.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	r.rows = 0
	err := r.conn.Raw(r.run)
	clear(r.args) // drop references to the callers' strings and slices
	return r.rows, err
}

func (r *rawStmt) execLocked(any) error {
	res, err := r.st.ExecContext(context.Background(), r.args)
	if err != nil {
		return err
	}
	r.rows, err = res.RowsAffected()
	return err
}

// close releases the statement.
func (r *rawStmt) close() error {
	return r.conn.Raw(func(any) error {
		st, _ := r.st.(driver.Stmt)
		if st == nil {
			return nil
		}
		return st.Close()
	})
}
