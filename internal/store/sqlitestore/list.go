package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/adminkit"
)

const (
	sqlListAll = `SELECT ` + jobColumns + ` FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`
	// sqlJobsBySeqOrdered reads the jobs of the seqs of the JSON array ?1,
	// in state ?2 unless it is empty.
	sqlJobsBySeqOrdered = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?1))
AND (?2 = '' OR state = ?2) ORDER BY seq`
	sqlSeqsQueueState = `SELECT seq FROM jobs WHERE queue = ?1 AND state = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4`
)

// sqlSeqsQueue is the first seqs of the jobs of one queue in every state:
// one range of the (queue, state, seq) index per state, merged by seq, so
// that a page costs the same however many jobs the queue holds.
var sqlSeqsQueue = func() string {
	ranges := make([]string, len(job.States))
	for i, st := range job.States {
		ranges[i] = fmt.Sprintf(`SELECT * FROM (SELECT seq FROM jobs WHERE queue = ?1 AND state = '%s' AND seq > ?3 ORDER BY seq LIMIT ?4)`, st)
	}
	return strings.Join(ranges, ` UNION ALL `) + ` ORDER BY seq LIMIT ?4`
}()

// cursors are this store's listing cursors; the prefix versions their
// format.
const cursors = store.SeqCursor("s1:")

// JobList returns one page of jobs in enqueue order; see store.Admin. The
// cursor encodes the seq of the page's last job. Active jobs are the
// leases in memory, whose rows may still say available: a listing of
// active jobs (by worker too) reads the lease table, a listing of
// available jobs leaves them out, and any other shows them as they stand.
func (s *Store) JobList(ctx context.Context, p *job.ListParams) (*job.ListPage, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list jobs", err)
	}
	after, limit, err := cursors.Start(p)
	if err != nil {
		return nil, err
	}
	var jobs []*job.Job
	var seqs []int64
	if p.State == job.StateActive {
		jobs, seqs, err = s.listActive(ctx, p, after, limit+1)
	} else {
		jobs, seqs, err = s.listStored(ctx, p, after, limit+1)
	}
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	return cursors.Page(jobs, seqs, limit), nil
}

// listActive lists up to n active jobs after seq that p's filters take,
// from the leases.
func (s *Store) listActive(ctx context.Context, p *job.ListParams, after int64, n int) ([]*job.Job, []int64, error) {
	views := s.leases.views(p.Queue, p.QueuePrefixes, p.Worker, after, n)
	if len(views) == 0 {
		return nil, nil, nil
	}
	want := make([]int64, len(views))
	for i, v := range views {
		want[i] = v.seq
	}
	jobs, seqs, err := s.query(ctx, sqlJobsBySeqOrdered, seqList(want), "")
	if err != nil {
		return nil, nil, err
	}
	out, outSeqs := jobs[:0], seqs[:0]
	for i, j := range jobs {
		k, _ := slices.BinarySearch(want, seqs[i])
		// The lease may have ended between the two reads: then the job is
		// no longer active and is left out.
		if v, ok := s.leases.viewOf(j.ID); ok && v.token == views[k].token {
			v.overlay(j)
			out, outSeqs = append(out, j), append(outSeqs, seqs[i])
		}
	}
	return out, outSeqs, nil
}

// JobCountActiveByWorker counts the active jobs of each named worker; see
// store.Admin. It reads the lease table's counts, in memory.
func (s *Store) JobCountActiveByWorker(_ context.Context, p *store.JobCountActiveByWorkerParams) (map[string]int, error) {
	if err := s.check(); err != nil {
		return nil, wrap("count active jobs by worker", err)
	}
	return s.leases.countByWorker(p.Workers), nil
}

// listStored lists up to n jobs after seq that p's filters take, from the
// database with leases applied; a listing of available jobs skips the
// active ones. Without filters it reads by seq; else it reads the seqs of
// the queues that may hold such jobs by the (queue, state, seq) index,
// merges them and then reads their rows. (An index on (state, seq) would
// serve this one listing and cost every state change two more index
// updates.)
func (s *Store) listStored(ctx context.Context, p *job.ListParams, after int64, n int) ([]*job.Job, []int64, error) {
	if p.Queue != "" && !job.HasPrefix(p.Queue, p.QueuePrefixes) {
		return nil, nil, nil
	}
	queues := []string{p.Queue}
	filtered := p.Queue != "" || p.State != "" || len(p.QueuePrefixes) > 0
	if p.Queue == "" && filtered {
		queues = s.counts.names(func(name string, c *adminkit.Counts) bool {
			if !job.HasPrefix(name, p.QueuePrefixes) {
				return false
			}
			if p.State != "" {
				return c[adminkit.Index(p.State)] > 0
			}
			return *c != adminkit.Counts{}
		})
	}
	var jobs []*job.Job
	var seqs []int64
	for len(jobs) < n {
		batch := n - len(jobs)
		want, got, gotSeqs, err := s.listPage(ctx, filtered, queues, p.State, after, batch)
		if err != nil {
			return nil, nil, err
		}
		views := s.leases.viewsOfSeqs(gotSeqs)
		for i, j := range got {
			if v, ok := views[gotSeqs[i]]; ok {
				if p.State == job.StateAvailable {
					continue
				}
				v.overlay(j)
			}
			jobs, seqs = append(jobs, j), append(seqs, gotSeqs[i])
		}
		if len(want) < batch {
			break
		}
		after = want[len(want)-1]
	}
	return jobs, seqs, nil
}

// listPage reads the jobs of the first n seqs after seq, want, of every
// queue or, when filtered, of queues in state (every state when empty).
// A job may have left the state, or gone, between the two reads of a
// filtered page: it is left out, and the next page reads on from want.
func (s *Store) listPage(ctx context.Context, filtered bool, queues []string, state job.State, after int64, n int) (
	want []int64, jobs []*job.Job, seqs []int64, err error) {
	if !filtered {
		jobs, seqs, err = s.query(ctx, sqlListAll, after, n)
		return seqs, jobs, seqs, err
	}
	for _, q := range queues {
		var more []int64
		if state == "" {
			more, err = s.seqs(ctx, sqlSeqsQueue, q, "", after, n)
		} else {
			more, err = s.seqs(ctx, sqlSeqsQueueState, q, string(state), after, n)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if want = append(want, more...); len(want) > 2*n {
			slices.Sort(want)
			want = want[:n]
		}
	}
	slices.Sort(want)
	if want = want[:min(len(want), n)]; len(want) == 0 {
		return nil, nil, nil, nil
	}
	jobs, seqs, err = s.query(ctx, sqlJobsBySeqOrdered, seqList(want), string(state))
	return want, jobs, seqs, err
}

// seqs reads the seqs a query returns.
func (s *Store) seqs(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	return scanAll(rows, err, func(r *sql.Rows, seq *int64) error { return r.Scan(seq) })
}

func (s *Store) query(ctx context.Context, query string, args ...any) ([]*job.Job, []int64, error) {
	return scanJobs(s.rdb.QueryContext(ctx, query, args...))
}
