package sqlitestore

import (
	"strings"
	"testing"
)

// The hot queries use their partial indexes rather than scanning jobs.
func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		query string
		args  []any
		index string
	}{
		{queries[stRefillSameRunAt], []any{"q", 0, int64(0), int64(0), 10}, "jobs_claim"},
		{queries[stRefillSamePriority], []any{"q", 0, int64(0), 10}, "jobs_claim"},
		{queries[stRefillBelow], []any{"q", 1000, 10}, "jobs_claim"},
		{sqlDueJobs, []any{int64(0), 10}, "jobs_due"},
		{sqlNextDue, nil, "jobs_due"},
		{sqlActiveJobs, nil, "jobs_lease"},
		{sqlPruneOldest, []any{`["dead"]`, 10, int64(0)}, "jobs_finished"},
		{sqlNewestUnique, []any{"q", "k"}, "jobs_unique"},
		{sqlSeqsQueueState, []any{"q", "dead", 0, 10}, "jobs_queue_state"},
		{sqlSeqsQueue, []any{"q", "", 0, 10}, "jobs_queue_state"},
		{sqlPromote, []any{"[1,2]"}, "INTEGER PRIMARY KEY"},
		{sqlJobExists, []any{"id"}, "sqlite_autoindex_jobs_1"},
		{sqlComplete, []any{"completed", nil, 0, 1, 1, 0, nil, "w", 1}, "INTEGER PRIMARY KEY"},
		{sqlFinishAttempt, []any{"dead", nil, 0, 1, 1, 0, nil, "{}", "w", 1}, "INTEGER PRIMARY KEY"},
		{sqlPersistLease, []any{1, 1, 0, 0, 0, nil, "w", 1}, "INTEGER PRIMARY KEY"},
		{sqlJobsBySeq, []any{"[1,2]"}, "INTEGER PRIMARY KEY"},
		{sqlJobsBySeqOrdered, []any{"[1,2]", ""}, "INTEGER PRIMARY KEY"},
		{sqlRetryMany, []any{0, nil, true, "q", "dead"}, "jobs_queue_state"},
		{sqlQueueWaiting, []any{"q", "available", 0, 10}, "jobs_queue_state"},
		{sqlWaitingPast, []any{int64(0), int64(0), 0, 10}, "jobs_wait"},
		{sqlNextWait, []any{int64(0)}, "jobs_wait"},
		{sqlDieOfWait, []any{0, "dead", "[]", 1}, "INTEGER PRIMARY KEY"},
		{sqlDeleteMany, []any{"q", "dead", "[]"}, "jobs_queue_state"},
	} {
		rows, err := b.s.rdb.Query("EXPLAIN QUERY PLAN "+tc.query, tc.args...)
		if err != nil {
			t.Fatalf("explain %s: %v", firstLine(tc.query), err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := closeRows(rows); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "; ")
		if !strings.Contains(text, tc.index) || strings.Contains(text, "SCAN jobs;") || strings.HasSuffix(text, "SCAN jobs") {
			t.Errorf("%s\n  plan: %s\n  want it to use %s without scanning jobs", firstLine(tc.query), text, tc.index)
		}
		if strings.Contains(text, "TEMP B-TREE") && tc.index != "jobs_queue_state" && tc.index != "INTEGER PRIMARY KEY" {
			t.Errorf("%s sorts: %s", firstLine(tc.query), text)
		}
	}
}
