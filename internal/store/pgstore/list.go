package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// cursors are this store's listing cursors; the prefix versions their
// format.
const cursors = store.SeqCursor("p1:")

// JobList returns one page of jobs in enqueue order; see store.Admin.
// Pending jobs are read from spool_jobs and finished ones from
// spool_jobs_done; without a state filter the two ordered scans are merged
// by seq. A listing by worker reads the worker index. The cursor is the
// seq of the page's last job.
func (a *admin) JobList(ctx context.Context, p *job.ListParams) (*job.ListPage, error) {
	if err := a.check(); err != nil {
		return nil, wrap("list jobs", err)
	}
	after, limit, err := cursors.Start(p)
	if err != nil {
		return nil, err
	}
	if p.Queue != "" && !job.HasPrefix(p.Queue, p.QueuePrefixes) {
		return &job.ListPage{}, nil
	}
	query, args := listQuery(p, after, limit+1)
	rows, err := a.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	jobs, seqs, err := scanJobs(rows)
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	return cursors.Page(jobs, seqs, limit), nil
}

// listQuery builds the listing query for p's filters: $1 is the cursor
// seq, $2 the page size, then the queue, the LIKE patterns of the queue
// prefixes, the state and the worker when set (a worker only with state
// active, in spool_jobs, whose worker index the condition names as the
// index's predicate does). "@" in the conditions stands for the table.
func listQuery(p *job.ListParams, after int64, limit int) (string, []any) {
	args := []any{after, limit}
	where := " WHERE @.seq > $1"
	add := func(cond string, arg any) {
		args = append(args, arg)
		where += fmt.Sprintf(" AND "+cond, len(args))
	}
	if p.Queue != "" {
		add("@.queue = $%d", p.Queue)
	}
	if len(p.QueuePrefixes) > 0 {
		add("@.queue LIKE ANY ($%d::text[])", prefixPatterns(p.QueuePrefixes))
	}
	if p.State != "" {
		add("@.state = $%d", string(p.State))
	}
	if p.Worker != "" {
		add("@.state = 'active' AND @.worker IS NOT NULL AND @.worker = $%d", p.Worker)
	}
	where += " ORDER BY @.seq LIMIT $2"
	hot, done := hotSelect+strings.ReplaceAll(where, "@", "j"), doneSelect+strings.ReplaceAll(where, "@", "d")
	switch {
	case p.State != "" && p.State.Final():
		return done, args
	case p.State != "":
		return hot, args
	}
	return `SELECT * FROM ((` + hot + `) UNION ALL (` + done + `)) x ORDER BY x.seq LIMIT $2`, args
}

// likeEscaper escapes the characters LIKE gives a meaning (with its
// default escape character, the backslash).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// prefixPatterns are the LIKE patterns of the names that start with one
// of prefixes, each compared byte for byte.
func prefixPatterns(prefixes []string) []string {
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		out[i] = likeEscaper.Replace(p) + "%"
	}
	return out
}

// sqlCountByWorker counts the active jobs of each worker of $1, with one
// seek of the worker index each.
const sqlCountByWorker = `SELECT w.name, c.n FROM unnest($1::text[]) AS w(name)
CROSS JOIN LATERAL (SELECT count(*) AS n FROM spool_jobs j
	WHERE j.state = 'active' AND j.worker IS NOT NULL AND j.worker = w.name) c
WHERE c.n > 0`

// JobCountActiveByWorker counts the active jobs of each named worker; see
// store.Admin.
func (a *admin) JobCountActiveByWorker(ctx context.Context, p *store.JobCountActiveByWorkerParams) (map[string]int, error) {
	if err := a.check(); err != nil {
		return nil, wrap("count active jobs by worker", err)
	}
	out := make(map[string]int)
	if len(p.Workers) == 0 {
		return out, nil
	}
	rows, err := a.pool.Query(ctx, sqlCountByWorker, p.Workers)
	if err != nil {
		return nil, wrap("count active jobs by worker", err)
	}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		out[name] = int(n)
		return nil
	}); err != nil {
		return nil, wrap("count active jobs by worker", err)
	}
	return out, nil
}
