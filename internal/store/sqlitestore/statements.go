package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The writer's prepared statements. A file declares each query the writer
// runs often beside the code that runs it, as a package-level variable
// (prepared, or preparedRaw for the statements of the hot paths that run
// without database/sql, see rawStmt); the writer prepares every one of
// them on its connection at open.
var queries, rawQueries []string

// stmtID names a query declared with prepared, rawID one declared with
// preparedRaw.
type (
	stmtID int
	rawID  int
)

// prepared declares query as a statement of the writer.
func prepared(query string) stmtID {
	queries = append(queries, query)
	return stmtID(len(queries) - 1)
}

// preparedRaw declares query as a statement of the writer run without
// database/sql.
func preparedRaw(query string) rawID {
	rawQueries = append(rawQueries, query)
	return rawID(len(rawQueries) - 1)
}

// statements are the writer's prepared statements, bound to its connection.
type statements struct {
	all []*sql.Stmt
	raw []*rawStmt
}

// get returns the statement of id.
func (s *statements) get(id stmtID) *sql.Stmt { return s.all[id] }

// getRaw returns the statement of id.
func (s *statements) getRaw(id rawID) *rawStmt { return s.raw[id] }

// prepare prepares every declared statement on conn.
func (s *statements) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, q := range queries {
		st, err := conn.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(q), err)
		}
		s.all = append(s.all, st)
	}
	for _, q := range rawQueries {
		st, err := prepareRaw(ctx, conn, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(q), err)
		}
		s.raw = append(s.raw, st)
	}
	return nil
}

func (s *statements) close() {
	for _, st := range s.all {
		_ = st.Close()
	}
	for _, st := range s.raw {
		_ = st.close()
	}
	s.all, s.raw = nil, nil
}

func firstLine(q string) string {
	line, _, _ := strings.Cut(q, "\n")
	return line
}
