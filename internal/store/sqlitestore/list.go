package sqlitestore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlJobsBySeqOrdered = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq`
	sqlListAll          = `SELECT ` + jobColumns + ` FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?`
	sqlListQueueState   = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND state = ? AND seq > ? ORDER BY seq LIMIT ?`
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
func (s *Store) JobList(ctx context.Context, p *store.JobListParams) (*store.JobListPage, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list jobs", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	after, err := decodeCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	limit := p.PageSize()
	var jobs []*job.Job
	var seqs []int64
	if p.State == job.StateActive {
		jobs, seqs, err = s.listActive(ctx, p.Queue, p.Worker, after, limit+1)
	} else {
		jobs, seqs, err = s.listStored(ctx, p, after, limit+1)
	}
	if err != nil {
		return nil, wrap("list jobs", err)
	}
	return cursors.Page(jobs, seqs, limit), nil
}

// listActive lists up to n active jobs of queue (every queue when empty)
// held by worker (any worker when empty) after seq.
func (s *Store) listActive(ctx context.Context, queue, worker string, after int64, n int) ([]*job.Job, []int64, error) {
	views := s.leases.views(queue, worker, after, n)
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
	byView := make(map[int64]view, len(views))
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
func (s *Store) listStored(ctx context.Context, p *store.JobListParams, after int64, n int) ([]*job.Job, []int64, error) {
	var jobs []*job.Job
	var seqs []int64
	for len(jobs) < n {
		batch := n - len(jobs)
		var got []*job.Job
		var gotSeqs []int64
		var err error
		switch {
		case p.Queue != "" && p.State == "":
			got, gotSeqs, err = s.query(ctx, sqlListQueue, p.Queue, after, batch)
		case p.Queue != "":
			got, gotSeqs, err = s.query(ctx, sqlListQueueState, p.Queue, string(p.State), after, batch)
		case p.State != "":
			got, gotSeqs, err = s.listStateAcrossQueues(ctx, p.State, after, batch)
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

// listStateAcrossQueues lists up to n jobs in state after seq across every
// queue: one range of the (queue, state, seq) index per queue, merged by
// seq. (An index on (state, seq) would serve this one listing and cost
// every state change two more index updates.)
func (s *Store) listStateAcrossQueues(ctx context.Context, state job.State, after int64, n int) ([]*job.Job, []int64, error) {
	var jobs []*job.Job
	var seqs []int64
	for _, q := range s.cat.list() {
		got, gotSeqs, err := s.query(ctx, sqlListQueueState, q.Name, string(state), after, n)
		if err != nil {
			return nil, nil, err
		}
		jobs, seqs = append(jobs, got...), append(seqs, gotSeqs...)
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return seqs[order[a]] < seqs[order[b]] })
	if len(order) > n {
		order = order[:n]
	}
	outJobs, outSeqs := make([]*job.Job, len(order)), make([]int64, len(order))
	for i, k := range order {
		outJobs[i], outSeqs[i] = jobs[k], seqs[k]
	}
	return outJobs, outSeqs, nil
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

// decodeCursor returns the seq a cursor stands for; an empty cursor is 0.
func decodeCursor(c string) (int64, error) {
	seq, err := cursors.Decode(c)
	if err != nil {
		return 0, fmt.Errorf("list jobs: %w", err)
	}
	return seq, nil
}
