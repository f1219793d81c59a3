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
	sqlJobsBySeqOrdered = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq`
	sqlListAll          = `SELECT ` + jobColumns + ` FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`
	sqlListQueueState   = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND state = ? AND seq > ? ORDER BY seq LIMIT ?`
	sqlJobsBySeqInState = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?)) AND state = ? ORDER BY seq`
	sqlSeqsQueueState   = `SELECT seq FROM jobs WHERE queue = ? AND state = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// cursors are this store's listing cursors; the prefix versions their
// format.
const cursors = store.SeqCursor("s1:")

// JobList returns one page of jobs in enqueue order; see store.Admin. The
// cursor is opaque to callers: it encodes the seq of the page's last job.
// Active jobs are the leases in memory, whose rows may still say
// available: a listing of active jobs reads the lease table, a listing of
// available jobs leaves them out, and any other listing shows them as they
// stand. A listing by worker reads the leases that worker holds.
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
		jobs, seqs, err = s.listActive(ctx, p.Queue, p.QueuePrefixes, p.Worker, after, limit+1)
	} else {
		jobs, seqs, err = s.listStored(ctx, p, after, limit+1)
	}
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	return cursors.Page(jobs, seqs, limit), nil
}

// listActive lists up to n active jobs of queue (every queue when empty)
// of a queue with one of prefixes held by worker (any worker when empty)
// after seq.
func (s *Store) listActive(ctx context.Context, queue string, prefixes []string, worker string, after int64, n int) ([]*job.Job, []int64, error) {
	views := s.leases.views(queue, prefixes, worker, after, n)
	if len(views) == 0 {
		return nil, nil, nil
	}
	want := make([]int64, len(views))
	for i, v := range views {
		want[i] = v.seq
	}
	jobs, seqs, err := s.query(ctx, sqlJobsBySeqOrdered, seqList(want))
	if err != nil {
		return nil, nil, err
	}
	byView := make(map[int64]lease, len(views))
	for _, v := range views {
		byView[v.seq] = v
	}
	out, outSeqs := jobs[:0], seqs[:0]
	for i, j := range jobs {
		// The lease may have ended between the two reads: then the job is
		// no longer active and is left out.
		if v, ok := s.leases.viewOf(j.ID); ok && v.token == byView[seqs[i]].token {
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

// listStored lists up to n jobs from the database after seq, with leases
// applied; a listing of available jobs skips the active ones.
func (s *Store) listStored(ctx context.Context, p *job.ListParams, after int64, n int) ([]*job.Job, []int64, error) {
	var jobs []*job.Job
	var seqs []int64
	for len(jobs) < n {
		batch := n - len(jobs)
		var got []*job.Job
		var gotSeqs []int64
		var err error
		switch {
		case p.Queue != "" && !job.HasPrefix(p.Queue, p.QueuePrefixes):
			return nil, nil, nil
		case p.Queue != "" && p.State == "":
			got, gotSeqs, err = s.query(ctx, sqlListQueue, p.Queue, after, batch)
		case p.Queue != "":
			got, gotSeqs, err = s.query(ctx, sqlListQueueState, p.Queue, string(p.State), after, batch)
		case p.State != "" || len(p.QueuePrefixes) > 0:
			got, gotSeqs, err = s.listAcrossQueues(ctx, p.QueuePrefixes, p.State, after, batch)
		default:
			got, gotSeqs, err = s.query(ctx, sqlListAll, after, batch)
		}
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
		if len(got) < batch {
			break
		}
		after = gotSeqs[len(gotSeqs)-1]
	}
	return jobs, seqs, nil
}

// listAcrossQueues lists up to n jobs in state (every state when empty)
// after seq across the queues that have one of prefixes (every queue when
// none) and a job in that state: the seqs of each queue's first n, by the
// (queue, state, seq) index, merged, then the rows of the first n of them.
// (An index on (state, seq) would serve this one listing and cost every
// state change two more index updates.)
func (s *Store) listAcrossQueues(ctx context.Context, prefixes []string, state job.State, after int64, n int) ([]*job.Job, []int64, error) {
	queues := s.counts.names(func(name string, c *adminkit.Counts) bool {
		if !job.HasPrefix(name, prefixes) {
			return false
		}
		if state != "" {
			return c[adminkit.Index(state)] > 0
		}
		return *c != adminkit.Counts{}
	})
	var jobs []*job.Job
	var seqs []int64
	for len(jobs) < n {
		batch := n - len(jobs)
		want, err := s.firstSeqs(ctx, queues, state, after, batch)
		if err != nil {
			return nil, nil, err
		}
		if len(want) == 0 {
			break
		}
		var got []*job.Job
		var gotSeqs []int64
		if state == "" {
			got, gotSeqs, err = s.query(ctx, sqlJobsBySeqOrdered, seqList(want))
		} else {
			got, gotSeqs, err = s.query(ctx, sqlJobsBySeqInState, seqList(want), string(state))
		}
		if err != nil {
			return nil, nil, err
		}
		// A job may have left the state, or gone, between the two reads:
		// it is left out, and the next round reads on from there.
		jobs, seqs = append(jobs, got...), append(seqs, gotSeqs...)
		if len(want) < batch {
			break
		}
		after = want[len(want)-1]
	}
	return jobs, seqs, nil
}

// firstSeqs is the first n seqs after seq of the jobs in state (every
// state when empty) of queues, in order.
func (s *Store) firstSeqs(ctx context.Context, queues []string, state job.State, after int64, n int) ([]int64, error) {
	var all []int64
	for _, q := range queues {
		var rows *sql.Rows
		var err error
		if state == "" {
			rows, err = s.rdb.QueryContext(ctx, sqlSeqsQueue, q, after, n)
		} else {
			rows, err = s.rdb.QueryContext(ctx, sqlSeqsQueueState, q, string(state), after, n)
		}
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				rows.Close()
				return nil, err
			}
			all = append(all, seq)
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		if len(all) > 2*n {
			slices.Sort(all)
			all = all[:n]
		}
	}
	slices.Sort(all)
	return all[:min(len(all), n)], nil
}

func (s *Store) query(ctx context.Context, query string, args ...any) ([]*job.Job, []int64, error) {
	return scanJobs(s.rdb.QueryContext(ctx, query, args...))
}

// sqlSeqsQueue is the first seqs of the jobs of one queue in every state:
// one range of the (queue, state, seq) index per state, merged by seq, so
// that a page costs the same however many jobs the queue holds;
// sqlListQueue reads their jobs.
var (
	sqlSeqsQueue = func() string {
		ranges := make([]string, len(job.States))
		for i, st := range job.States {
			ranges[i] = fmt.Sprintf(`SELECT * FROM (SELECT seq FROM jobs WHERE queue = ?1 AND state = '%s' AND seq > ?2 ORDER BY seq LIMIT ?3)`, st)
		}
		return strings.Join(ranges, ` UNION ALL `) + ` ORDER BY seq LIMIT ?3`
	}()
	sqlListQueue = `SELECT ` + jobColumns + ` FROM jobs WHERE seq IN (` + sqlSeqsQueue + `) ORDER BY seq LIMIT ?3`
)
