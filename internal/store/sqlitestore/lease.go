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

// lease is one active job, held in memory only: a hand-out, a heartbeat
// or a progress report writes nothing, and the row keeps its available
// state until the attempt's outcome is written. A crash loses only the
// hand-out: the job is available again after a restart, whose fencing
// tokens are all higher (tokenSource). A lease is written to its row
// (persisted) by a cancel while it runs and at close, and read back at
// open.
type lease struct {
	seq, token int64
	id, queue  string
	kind       string
	// group counts against its queue's group caps; key is the job's place
	// in claim order, to return it to its window.
	group string
	key   entry
	// attempt counts hand-outs including this one.
	attempt, maxAttempts int
	backoff              job.Backoff
	// duration is the job's own lease duration, the default of extends.
	duration             time.Duration
	startedAt, expiresAt time.Time
	cancel               bool
	progress             json.RawMessage
	// worker names the worker that holds the lease, "" for none.
	worker string
	// persisted is true while the row says active.
	persisted bool
	// durability decides whether the outcome's commit waits for the disk.
	durability job.Durability
	// index is the lease's position in the expiry heap.
	index int
}

// leaseTable holds every active job. The writer changes it; readers look
// leases up under the read lock.
type leaseTable struct {
	mu     sync.RWMutex
	byID   map[string]*lease
	bySeq  map[int64]*lease
	expiry expiryHeap
	// perQueue, perGroup and perWorker count the leases of each queue,
	// group (of a queue; "" for none) and named worker.
	perQueue  map[string]int
	perGroup  map[groupKey]int
	perWorker map[string]int
	// undo takes back the running batch's changes should it not commit.
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

// get returns the lease of job id, or nil. Writer only.
func (t *leaseTable) get(id string) *lease { return t.byID[id] }

// leased reports whether the job with seq is active. Writer only.
func (t *leaseTable) leased(seq int64) bool { return t.bySeq[seq] != nil }

// held reports whether the job with seq is active, beside the writer.
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
	t.tally(l, 1)
	heap.Push(&t.expiry, l)
}

// tally adds d to the counts of l's queue, group and worker, forgetting
// those that reach zero.
func (t *leaseTable) tally(l *lease, d int) {
	bump(t.perQueue, l.queue, d)
	bump(t.perGroup, groupKey{l.queue, l.group}, d)
	if l.worker != "" {
		bump(t.perWorker, l.worker, d)
	}
}

func bump[K comparable](m map[K]int, k K, d int) {
	if m[k] += d; m[k] <= 0 {
		delete(m, k)
	}
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
	t.tally(l, -1)
	heap.Remove(&t.expiry, l.index)
}

// countByWorker returns how many leases each of workers holds, if any.
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

// update changes a lease in place under the lock, keeping the heap.
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

// views returns copies of up to limit leases above seq after, by seq, of
// queue and held by worker (each: any when empty), of a queue with one of
// prefixes (job.HasPrefix).
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

// overlay applies the lease to j, read from a row that may say available.
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

// keep forgets the undo of the running batch, which committed.
func (t *leaseTable) keep() {
	clear(t.undo)
	t.undo = t.undo[:0]
}

// sqlActiveJobs reads the jobs whose rows say active (persisted leases).
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
