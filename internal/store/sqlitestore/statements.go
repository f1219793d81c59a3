package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// statements are the writer's prepared statements, bound to its connection.
type statements struct {
	begin, commit *sql.Stmt

	insertQueue, setPaused      *sql.Stmt
	jobByID, jobBySeq           *sql.Stmt
	newestUnique                *sql.Stmt
	jobsBySeq, jobExists        *sql.Stmt
	finishAttempt, persistLease *sql.Stmt
	errorsBySeq                 *sql.Stmt

	// The claims by group (flow.go).
	groupsFrom, groupsAfter       *sql.Stmt
	groupFirst, groupSamePriority *sql.Stmt
	groupBelow                    *sql.Stmt
	sweepStale                    *sql.Stmt

	// The statements of the hot paths, run without database/sql:
	// insertRows[k] inserts 1<<k jobs.
	// completeRows[k] acknowledges 1<<k jobs.
	insertRows   [insertChunkShift + 1]*rawStmt
	completeRows [completeChunkShift + 1]*rawStmt

	all []*sql.Stmt
	raw []*rawStmt
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
		{&s.jobByID, sqlJobByID},
		{&s.jobBySeq, sqlJobBySeq},
		{&s.newestUnique, sqlNewestUnique},
		{&s.jobsBySeq, sqlJobsBySeq},
		{&s.jobExists, sqlJobExists},
		{&s.finishAttempt, sqlFinishAttempt},
		{&s.persistLease, sqlPersistLease},
		{&s.errorsBySeq, sqlErrorsBySeq},
		{&s.groupsFrom, sqlGroupsFrom},
		{&s.groupsAfter, sqlGroupsAfter},
		{&s.groupFirst, sqlGroupFirst},
		{&s.groupSamePriority, sqlGroupSamePriority},
		{&s.groupBelow, sqlGroupBelow},
		{&s.sweepStale, sqlSweepStale},
	} {
		st, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.query), err)
		}
		*p.dst = st
		s.all = append(s.all, st)
	}
	type rawQuery struct {
		dst   **rawStmt
		query string
	}
	var raws []rawQuery
	for k := range s.insertRows {
		raws = append(raws, rawQuery{&s.insertRows[k], sqlInsertRows(1 << k)})
	}
	for k := range s.completeRows {
		raws = append(raws, rawQuery{&s.completeRows[k], sqlCompleteRows(1 << k)})
	}
	for _, p := range raws {
		st, err := prepareRaw(ctx, conn, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.query), err)
		}
		*p.dst = st
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
	for i := 0; i < len(q); i++ {
		if q[i] == '\n' {
			return q[:i]
		}
	}
	return q
}
