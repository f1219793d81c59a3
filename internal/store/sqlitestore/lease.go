package sqlitestore

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
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
	// group is the job's group, counted against its queue's
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

// leaseTable holds every active job. The holder of the committer's turn
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
	// undo takes back the changes of the running batch (grant, drop,
	// change), so that a batch that does not commit leaves the table as
	// it was. Writer only.
	undo []func()
}

// groupKey names one group of one queue.
type groupKey struct{ queue, group string }

func newLeaseTable() *leaseTable {
	return &leaseTable{byID: make(map[string]*lease), bySeq: make(map[int64]*lease), perQueue: make(map[string]int),
		perGroup: make(map[groupKey]int), perWorker: make(map[string]int)}
}

// inGroup is how many jobs of group of queue are active. Writer only.
func (t *leaseTable) inGroup(queue, group string) int { return t.perGroup[groupKey{queue, group}] }

// count is how many jobs are active. Writer only.
func (t *leaseTable) count() int { return len(t.byID) }

// get returns the lease of job id, or nil. Writer only: readers use
// viewOf.
func (t *leaseTable) get(id string) *lease { return t.byID[id] }

// leased reports whether the job with seq is active. Writer only: readers
// use held.
func (t *leaseTable) leased(seq int64) bool { return t.bySeq[seq] != nil }

// held reports whether the job with seq is active. Safe beside the
// writer.
func (t *leaseTable) held(seq int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.bySeq[seq] != nil
}

// ofQueue returns the leases of queue. Writer only.
func (t *leaseTable) ofQueue(queue string) []*lease {
	if t.perQueue[queue] == 0 {
		return nil
	}
	var out []*lease
	for _, l := range t.byID {
		if l.queue == queue {
			out = append(out, l)
		}
	}
	return out
}

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

// viewOf returns a copy of the lease of job id, as readers see it.
func (t *leaseTable) viewOf(id string) (lease, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.byID[id]
	if l == nil {
		return lease{}, false
	}
	return *l, true
}

// viewsOfSeqs returns copies of the leases among seqs, by seq.
func (t *leaseTable) viewsOfSeqs(seqs []int64) map[int64]lease {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out map[int64]lease
	for _, seq := range seqs {
		if l := t.bySeq[seq]; l != nil {
			if out == nil {
				out = make(map[int64]lease)
			}
			out[seq] = *l
		}
	}
	return out
}

// views returns copies of the leases of queue (every queue when empty) of
// a queue with one of prefixes (see job.HasPrefix) held by worker
// (every worker when empty) with seq above after, by seq, at most limit
// of them.
func (t *leaseTable) views(queue string, prefixes []string, worker string, after int64, limit int) []lease {
	t.mu.RLock()
	var out []lease
	for _, l := range t.byID {
		if l.seq > after && (queue == "" || l.queue == queue) && (worker == "" || l.worker == worker) && job.HasPrefix(l.queue, prefixes) {
			out = append(out, *l)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b lease) int { return cmp.Compare(a.seq, b.seq) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// overlay applies the lease to a job read from the database, whose row
// may still say available.
func (l *lease) overlay(j *job.Job) {
	j.State = job.StateActive
	j.Attempt = l.attempt
	j.LeaseToken = l.token
	j.StartedAt = l.startedAt
	j.LeaseExpiresAt = l.expiresAt
	j.CancelRequested = l.cancel
	j.Progress = l.progress
	j.Worker = l.worker
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

// grant records a new lease as part of the running batch.
func (t *leaseTable) grant(l *lease) {
	t.add(l)
	t.undo = append(t.undo, func() { t.remove(l) })
}

// drop forgets a lease as part of the running batch.
func (t *leaseTable) drop(l *lease) {
	t.remove(l)
	t.undo = append(t.undo, func() { t.add(l) })
}

// change alters a lease as part of the running batch.
func (t *leaseTable) change(l *lease, fn func(l *lease)) {
	before := *l
	t.update(l, fn)
	t.undo = append(t.undo, func() {
		t.update(l, func(l *lease) {
			index := l.index
			*l = before
			l.index = index
		})
	})
}

// revert takes back the running batch's changes, last first.
func (t *leaseTable) revert() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.keep()
}

// keep forgets how to take back the running batch's changes: it
// committed.
func (t *leaseTable) keep() {
	clear(t.undo)
	t.undo = t.undo[:0]
}

// sqlActiveJobs reads the jobs whose rows say active: leases written at
// close or by a cancel.
const sqlActiveJobs = `SELECT ` + jobColumns + ` FROM jobs INDEXED BY jobs_lease WHERE state = 'active'`

// loadLeases reads the leases written to the database into a new table.
func loadLeases(ctx context.Context, conn *sql.Conn) (*leaseTable, error) {
	t := newLeaseTable()
	jobs, seqs, err := scanJobs(conn.QueryContext(ctx, sqlActiveJobs))
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
