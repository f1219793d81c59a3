package sqlitestore

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// lease is one active job, held in memory. A claim writes nothing to the
// database: the row keeps its available state until the job's outcome
// (ack, fail, rescue) is written, so a hand-out, a heartbeat or a progress
// report costs no write and no fsync. What a crash loses is the hand-out
// itself: the job is available again after a restart, and the fencing
// tokens of the new process are all higher than the old ones (see
// tokenSource), so a worker of the old process can no longer ack it.
// Leases are written to the database (the row becomes active) when a user
// cancels the job while it runs and when the store closes, and read back
// at open.
type lease struct {
	seq   int64
	id    string
	queue string
	// kind is the job's kind, for the outcome of its attempt.
	kind string
	// group is the job's flow-control group, counted against its queue's
	// group caps.
	group string
	// key is the job's place in claim order, to return it to its window.
	key entry
	// token is the fencing token of this hand-out.
	token int64
	// attempt counts hand-outs including this one.
	attempt     int
	maxAttempts int
	backoff     job.Backoff
	// duration is the job's own lease duration, the default of extends.
	duration  time.Duration
	startedAt time.Time
	expiresAt time.Time
	cancel    bool
	progress  json.RawMessage
	// worker is the name of the worker that holds the lease (empty for
	// none): the job's Worker, written to its row with the attempt's
	// outcome, as the rest of the lease is.
	worker string
	// persisted is true while the row in the database says active.
	persisted bool
	// durability is the job's, which decides whether its outcome's commit
	// waits for the disk.
	durability job.Durability
	// index is the lease's position in the expiry heap.
	index int
}

// leaseTable holds every active job. The holder of the writer's turn
// changes it; readers (JobGet, JobList) look leases up under the read
// lock.
type leaseTable struct {
	mu     sync.RWMutex
	byID   map[string]*lease
	bySeq  map[int64]*lease
	expiry expiryHeap
	// perQueue counts the leases of each queue, perGroup those of each
	// group of each queue (jobs without a group count as group ""),
	// perWorker those of each named worker.
	perQueue  map[string]int
	perGroup  map[groupKey]int
	perWorker map[string]int
}

// groupKey names one group of one queue.
type groupKey struct{ queue, group string }

func newLeaseTable() *leaseTable {
	return &leaseTable{byID: make(map[string]*lease), bySeq: make(map[int64]*lease), perQueue: make(map[string]int),
		perGroup: make(map[groupKey]int), perWorker: make(map[string]int)}
}

// inGroup is how many jobs of group of queue are active. Writer only.
func (t *leaseTable) inGroup(queue, group string) int { return t.perGroup[groupKey{queue, group}] }

// len is how many jobs are active.
func (t *leaseTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// get returns the lease of job id, or nil. Writer only: readers use view.
func (t *leaseTable) get(id string) *lease { return t.byID[id] }

// leased reports whether the job with seq is active. Writer only.
func (t *leaseTable) leased(seq int64) bool { return t.bySeq[seq] != nil }

// add records a new lease.
func (t *leaseTable) add(l *lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[l.id] = l
	t.bySeq[l.seq] = l
	t.perQueue[l.queue]++
	t.perGroup[groupKey{l.queue, l.group}]++
	if l.worker != "" {
		t.perWorker[l.worker]++
	}
	heap.Push(&t.expiry, l)
}

// remove forgets a lease.
func (t *leaseTable) remove(l *lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[l.id] != l {
		return
	}
	delete(t.byID, l.id)
	delete(t.bySeq, l.seq)
	if t.perQueue[l.queue]--; t.perQueue[l.queue] <= 0 {
		delete(t.perQueue, l.queue)
	}
	k := groupKey{l.queue, l.group}
	if t.perGroup[k]--; t.perGroup[k] <= 0 {
		delete(t.perGroup, k)
	}
	if l.worker != "" {
		if t.perWorker[l.worker]--; t.perWorker[l.worker] <= 0 {
			delete(t.perWorker, l.worker)
		}
	}
	heap.Remove(&t.expiry, l.index)
}

// countByWorker returns how many leases each of workers holds, leaving
// out those that hold none.
func (t *leaseTable) countByWorker(workers []string) map[string]int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]int)
	for _, w := range workers {
		if n := t.perWorker[w]; n > 0 {
			out[w] = n
		}
	}
	return out
}

// update changes a lease in place under the lock and keeps the expiry heap
// in order.
func (t *leaseTable) update(l *lease, change func(l *lease)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	change(l)
	if t.byID[l.id] == l {
		heap.Fix(&t.expiry, l.index)
	}
}

// earliest returns the lease that expires first, or nil. Writer only.
func (t *leaseTable) earliest() *lease {
	if len(t.expiry) == 0 {
		return nil
	}
	return t.expiry[0]
}

// inQueue is how many leases queue has. Writer only.
func (t *leaseTable) inQueue(queue string) int { return t.perQueue[queue] }

// all returns every lease. Writer only.
func (t *leaseTable) all() []*lease {
	out := make([]*lease, 0, len(t.byID))
	for _, l := range t.byID {
		out = append(out, l)
	}
	return out
}

// view is what a reader needs of a lease: a copy taken under the lock.
type view struct {
	seq       int64
	queue     string
	token     int64
	attempt   int
	startedAt time.Time
	expiresAt time.Time
	cancel    bool
	progress  json.RawMessage
	worker    string
}

func (l *lease) view() view {
	return view{seq: l.seq, queue: l.queue, token: l.token, attempt: l.attempt, startedAt: l.startedAt,
		expiresAt: l.expiresAt, cancel: l.cancel, progress: l.progress, worker: l.worker}
}

// viewOf returns the lease of job id as readers see it.
func (t *leaseTable) viewOf(id string) (view, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.byID[id]
	if l == nil {
		return view{}, false
	}
	return l.view(), true
}

// viewsOfSeqs returns the leases among seqs, by seq.
func (t *leaseTable) viewsOfSeqs(seqs []int64) map[int64]view {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out map[int64]view
	for _, seq := range seqs {
		if l := t.bySeq[seq]; l != nil {
			if out == nil {
				out = make(map[int64]view)
			}
			out[seq] = l.view()
		}
	}
	return out
}

// views returns the leases of queue (every queue when empty) of a queue
// with one of prefixes (see store.HasPrefix) held by worker (every worker
// when empty) with seq above after, by seq, at most limit of them.
func (t *leaseTable) views(queue string, prefixes []string, worker string, after int64, limit int) []view {
	t.mu.RLock()
	var out []view
	for _, l := range t.byID {
		if l.seq > after && (queue == "" || l.queue == queue) && (worker == "" || l.worker == worker) && store.HasPrefix(l.queue, prefixes) {
			out = append(out, l.view())
		}
	}
	t.mu.RUnlock()
	sortViews(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// overlay applies a lease to a job read from the database, whose row may
// still say available.
func (v view) overlay(j *job.Job) {
	j.State = job.StateActive
	j.Attempt = v.attempt
	j.LeaseToken = v.token
	j.StartedAt = v.startedAt
	j.LeaseExpiresAt = v.expiresAt
	j.CancelRequested = v.cancel
	j.Progress = v.progress
	j.Worker = v.worker
	j.FinishedAt = time.Time{}
}

// expiryHeap orders leases by expiry, earliest first.
type expiryHeap []*lease

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if !h[i].expiresAt.Equal(h[j].expiresAt) {
		return h[i].expiresAt.Before(h[j].expiresAt)
	}
	return h[i].seq < h[j].seq
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *expiryHeap) Push(x any) {
	l := x.(*lease)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *expiryHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.index = -1
	return l
}

// undo records lease changes of the running batch so that a batch that
// does not commit leaves the table as it was.
type undo struct {
	steps []func()
}

func (u *undo) add(step func()) { u.steps = append(u.steps, step) }

// revert applies the recorded steps in reverse and forgets them.
func (u *undo) revert() {
	for i := len(u.steps) - 1; i >= 0; i-- {
		u.steps[i]()
	}
	u.reset()
}

func (u *undo) reset() {
	clear(u.steps)
	u.steps = u.steps[:0]
}

// sortViews orders views by seq.
func sortViews(vs []view) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].seq < vs[j].seq })
}

// sqlActiveJobs reads the jobs whose rows say active: leases written at
// close or by a cancel.
const sqlActiveJobs = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_lease WHERE state = 'active'`

// loadLeases reads the leases written to the database into a new table.
func loadLeases(ctx context.Context, conn *sql.Conn) (*leaseTable, error) {
	t := newLeaseTable()
	rows, err := conn.QueryContext(ctx, sqlActiveJobs)
	if err != nil {
		return nil, fmt.Errorf("read active jobs: %w", err)
	}
	jobs, seqs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("read active jobs: %w", err)
	}
	for i, j := range jobs {
		t.add(&lease{
			seq: seqs[i], id: j.ID, queue: j.Queue, kind: j.Kind, group: j.Group, key: entryOf(j, seqs[i]), token: j.LeaseToken,
			attempt: j.Attempt, maxAttempts: j.MaxAttempts, backoff: j.Backoff, duration: j.LeaseDuration,
			startedAt: j.StartedAt, expiresAt: j.LeaseExpiresAt, cancel: j.CancelRequested, progress: j.Progress,
			worker: j.Worker, persisted: true, durability: j.Durability,
		})
	}
	return t, nil
}

// persistAll writes every lease to its job's row, and the rate logs of
// flow control to theirs; the store runs it last, at close.
func (w *writer) persistAll() error {
	for _, l := range w.leases.all() {
		if err := w.persist(l, l.cancel); err != nil {
			return err
		}
		w.change(l, func(l *lease) { l.persisted = true })
	}
	if err := w.sweepStale(1); err != nil {
		return err
	}
	return w.saveRateLogs()
}

// Active reports whether job id holds a lease in this store. It reads
// memory only, so a caller that routes calls between stores can ask it on
// every call.
func (s *Store) Active(id string) bool {
	_, ok := s.leases.viewOf(id)
	return ok
}
