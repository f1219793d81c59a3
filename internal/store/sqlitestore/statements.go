package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// statements are the writer's prepared statements, bound to its connection.
type statements struct {
	begin, commit *sql.Stmt

	insertQueue, setPaused                   *sql.Stmt
	insertJob, insertJobs, jobByID, jobBySeq *sql.Stmt
	newestUnique                             *sql.Stmt
	jobsBySeq, jobExists                     *sql.Stmt
	complete, completeMany                   *sql.Stmt
	finishAttempt, persistLease              *sql.Stmt

	all []*sql.Stmt
}

// prepare prepares every statement on conn.
func (s *statements) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&s.begin, `BEGIN IMMEDIATE`},
		{&s.commit, `COMMIT`},
		{&s.insertQueue, sqlInsertQueue},
		{&s.setPaused, sqlSetPaused},
		{&s.insertJob, sqlInsertJob},
		{&s.insertJobs, sqlInsertJobs},
		{&s.jobByID, sqlJobByID},
		{&s.jobBySeq, sqlJobBySeq},
		{&s.newestUnique, sqlNewestUnique},
		{&s.jobsBySeq, sqlJobsBySeq},
		{&s.jobExists, sqlJobExists},
		{&s.complete, sqlComplete},
		{&s.completeMany, sqlCompleteMany},
		{&s.finishAttempt, sqlFinishAttempt},
		{&s.persistLease, sqlPersistLease},
	} {
		st, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.query), err)
		}
		*p.dst = st
		s.all = append(s.all, st)
	}
	return nil
}

func (s *statements) close() {
	for _, st := range s.all {
		_ = st.Close()
	}
	s.all = nil
}

func firstLine(q string) string {
	for i := 0; i < len(q); i++ {
		if q[i] == '\n' {
			return q[:i]
		}
	}
	return q
}
