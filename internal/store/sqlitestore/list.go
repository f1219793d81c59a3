package sqlitestore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlListAll        = `SELECT ` + jobColumns + ` FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`
	sqlListState      = `SELECT ` + jobColumns + ` FROM jobs WHERE state = ? AND seq > ? ORDER BY seq LIMIT ?`
	sqlListQueueState = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND state = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// cursorPrefix versions the cursor format.
const cursorPrefix = "s1:"

// JobList returns one page of jobs in enqueue order; see store.Admin. The
// cursor is opaque to callers: it encodes the seq of the page's last job.
func (s *Store) JobList(ctx context.Context, p *store.JobListParams) (*store.JobListPage, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list jobs", err)
	}
	after, err := decodeCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var jobs []*job.Job
	var seqs []int64
	switch {
	case p.Queue != "" && p.State == "":
		jobs, seqs, err = s.query(ctx, sqlListQueue, p.Queue, after, limit+1)
	case p.Queue != "":
		jobs, seqs, err = s.query(ctx, sqlListQueueState, p.Queue, string(p.State), after, limit+1)
	case p.State != "":
		jobs, seqs, err = s.query(ctx, sqlListState, string(p.State), after, limit+1)
	default:
		jobs, seqs, err = s.query(ctx, sqlListAll, after, limit+1)
	}
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	page := &store.JobListPage{Jobs: jobs}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		page.Next = encodeCursor(seqs[limit-1])
	}
	return page, nil
}

func (s *Store) query(ctx context.Context, query string, args ...any) ([]*job.Job, []int64, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	return scanJobs(rows)
}

// sqlListQueue lists the jobs of one queue in every state: one range of
// the (queue, state, seq) index per state, merged by seq, so that a page
// costs the same however many jobs the queue holds.
var sqlListQueue = func() string {
	var b strings.Builder
	b.WriteString(`SELECT ` + jobColumns + ` FROM jobs WHERE seq IN (`)
	for i, st := range job.States {
		if i > 0 {
			b.WriteString(` UNION ALL `)
		}
		fmt.Fprintf(&b, `SELECT * FROM (SELECT seq FROM jobs WHERE queue = ?1 AND state = '%s' AND seq > ?2 ORDER BY seq LIMIT ?3)`, st)
	}
	b.WriteString(`) ORDER BY seq LIMIT ?3`)
	return b.String()
}()

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seq, 10)))
}

// decodeCursor returns the seq a cursor encodes; an empty cursor is 0.
func decodeCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && strings.HasPrefix(string(raw), cursorPrefix) {
		seq, perr := strconv.ParseInt(strings.TrimPrefix(string(raw), cursorPrefix), 10, 64)
		if perr == nil && seq >= 0 {
			return seq, nil
		}
	}
	return 0, fmt.Errorf("list jobs: %w", job.Invalid("cursor", "is not a cursor this server issued"))
}
