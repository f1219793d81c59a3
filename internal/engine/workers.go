package engine

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// MaxWorkers bounds the workers an engine remembers (see Workers): past
// it, the one seen least recently is forgotten.
const MaxWorkers = store.MaxWorkerCount

// WorkerInfo is a worker the engine has seen fetch, and what it holds.
type WorkerInfo struct {
	// Name is the worker's name as its fetches gave it (in its
	// job.WorkerName form).
	Name string
	// FirstSeen is when this node first saw a fetch of the worker, since
	// it started or since it last forgot the worker.
	FirstSeen time.Time
	// LastSeen is when this node last saw a fetch of the worker begin.
	LastSeen time.Time
	// Active is how many active jobs the store says the worker holds, on
	// every node.
	Active int
}

// Workers lists the workers whose fetches this node has seen (at most
// MaxWorkers, the least recently seen forgotten first), by name, each
// with how many active jobs it holds. The registry is the node's own and
// lives in memory: a restart empties it, and a worker that fetches from
// another node only is not in it. The counts are the store's, one read
// for them all.
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	out := e.workers.list()
	if len(out) == 0 {
		return out, nil
	}
	names := make([]string, len(out))
	for i := range out {
		names[i] = out[i].Name
	}
	counts, err := e.st.JobCountActiveByWorker(ctx, &store.JobCountActiveByWorkerParams{Workers: names})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	for i := range out {
		out[i].Active = counts[out[i].Name]
	}
	return out, nil
}

// workerRegistry remembers the workers seen fetching, least recently seen
// first out, up to max of them. It is safe for concurrent use.
type workerRegistry struct {
	mu  sync.Mutex
	max int
	// byName holds an element of order for each worker; order runs from
	// the most recently seen to the least.
	byName map[string]*list.Element
	order  list.List
}

// seenWorker is what the registry keeps of a worker.
type seenWorker struct {
	name            string
	first, lastSeen time.Time
}

func newWorkerRegistry(max int) *workerRegistry {
	return &workerRegistry{max: max, byName: make(map[string]*list.Element)}
}

// seen records a fetch of worker name at now, forgetting the worker seen
// least recently when the registry is full. A name seen again keeps its
// first sighting.
func (r *workerRegistry) seen(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el := r.byName[name]; el != nil {
		w := el.Value.(*seenWorker)
		if now.After(w.lastSeen) {
			w.lastSeen = now
		}
		r.order.MoveToFront(el)
		return
	}
	if r.order.Len() >= r.max {
		oldest := r.order.Back()
		delete(r.byName, oldest.Value.(*seenWorker).name)
		r.order.Remove(oldest)
	}
	r.byName[name] = r.order.PushFront(&seenWorker{name: name, first: now, lastSeen: now})
}

// list returns the workers remembered, sorted by name, without counts.
func (r *workerRegistry) list() []WorkerInfo {
	r.mu.Lock()
	out := make([]WorkerInfo, 0, r.order.Len())
	for el := r.order.Front(); el != nil; el = el.Next() {
		w := el.Value.(*seenWorker)
		out = append(out, WorkerInfo{Name: w.name, FirstSeen: w.first, LastSeen: w.lastSeen})
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}
