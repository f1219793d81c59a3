package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/bits"
)

// rawStmt is a statement prepared on the write connection's driver
// connection and run without database/sql or go-sqlite3 in between. The
// multi-row statements of the hot paths carry hundreds of arguments:
// database/sql converts each into a freshly allocated slice on every call,
// and go-sqlite3 binds each with a call from Go into C. A rawStmt packs
// them into one reused buffer and runs the statement with one call
// (packedStmt). It is used inside (*sql.Conn).Raw only, so database/sql's
// ownership of the connection is kept.
type rawStmt struct {
	conn   *sql.Conn
	st     driver.Stmt
	packed *packedStmt

	// run is the callback given to Raw, made once so that an exec
	// allocates nothing for it; rows carries its outcome.
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
		if r.packed, err = newPackedStmt(st); err != nil {
			_ = st.Close()
			return err
		}
		r.st = st
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.run = r.execLocked
	return r, nil
}

// args returns the statement's argument buffer, emptied, for a caller to
// pack the arguments of execArgs into without boxing each in an any.
func (r *rawStmt) args() *packedArgs {
	r.packed.args.reset()
	return &r.packed.args
}

// maxKeptArgBytes bounds the argument buffer a statement keeps between
// runs: one that large payloads grew past it is let go after its run.
const maxKeptArgBytes = 1 << 20

// execArgs runs the statement with the arguments packed into args and
// returns the number of rows it changed.
func (r *rawStmt) execArgs() (int64, error) {
	r.rows = 0
	err := r.conn.Raw(r.run)
	r.packed.args.reset()
	if cap(r.packed.args.buf) > maxKeptArgBytes {
		r.packed.args.buf = nil
	}
	return r.rows, err
}

func (r *rawStmt) execLocked(any) error {
	var err error
	r.rows, err = r.packed.exec()
	return err
}

// close releases the statement.
func (r *rawStmt) close() error {
	return r.conn.Raw(func(any) error {
		if r.st == nil {
			return nil
		}
		return r.st.Close()
	})
}

// inSizedRuns calls write for consecutive runs of items, each the largest
// power of two of them, at most 1<<maxShift, that is left, with the run
// and its base-2 logarithm (the index of the statement of that size): 29
// items as runs of 16, 8, 4 and 1.
func inSizedRuns[T any](items []T, maxShift int, write func(run []T, shift int) error) error {
	for len(items) > 0 {
		shift := min(bits.Len(uint(len(items)))-1, maxShift)
		if err := write(items[:1<<shift], shift); err != nil {
			return err
		}
		items = items[1<<shift:]
	}
	return nil
}
