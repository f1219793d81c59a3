package job

import "strings"

// ListParams filters and pages a job listing.
type ListParams struct {
	// Queue filters by queue; empty means every queue.
	Queue string
	// State filters by state; empty means every state.
	State State
	// QueuePrefixes, when not empty, lists only the jobs of the queues
	// whose names start with one of them (compared byte for byte; a
	// token's namespaces), with Queue as well as without. A store finds
	// them in its query, never by reading other queues' jobs and leaving
	// them out, so that a page costs the same however many jobs other
	// queues hold. At most MaxListPrefixes of them.
	QueuePrefixes []string
	// Worker, with State active, lists only the active jobs that worker
	// holds (Job.Worker, in its WorkerName form); empty means
	// every worker. A store refuses it with any other state, with an
	// error wrapping a *InputError (see Check): a store finds the
	// jobs a worker holds through its active jobs alone.
	Worker string
	// Cursor is the Next of the previous page; empty starts at the oldest.
	// Cursors stay valid across restarts. A cursor the store did not issue
	// is an error wrapping a *InputError.
	Cursor string
	// Limit caps the page size (the engine bounds it).
	Limit int
}

// HasPrefix reports whether name starts with one of prefixes, or
// prefixes is empty: whether a listing limited to prefixes
// (ListParams.QueuePrefixes) shows the jobs of queue name.
func HasPrefix(name string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// MaxListPrefixes bounds ListParams.QueuePrefixes.
const MaxListPrefixes = 256

// Check refuses a listing no store serves, with an error wrapping a
// *InputError naming the parameter: Worker without State active, or
// more than MaxListPrefixes QueuePrefixes.
func (p *ListParams) Check() error {
	if p.Worker != "" && p.State != StateActive {
		return Invalid("worker", "goes only with state=active: a listing by worker shows the jobs a worker holds")
	}
	if len(p.QueuePrefixes) > MaxListPrefixes {
		return Invalid("queue_prefixes", "must be at most %d", MaxListPrefixes)
	}
	return nil
}

// defaultPageSize is the page size of a listing without a limit, for every
// store and the engine alike.
const defaultPageSize = 100

// PageSize is the page size p asks for: Limit, or defaultPageSize (100)
// when it is not set.
func (p *ListParams) PageSize() int {
	if p.Limit <= 0 {
		return defaultPageSize
	}
	return p.Limit
}

// ListPage is one page of a listing.
type ListPage struct {
	Jobs []*Job
	// Next is the cursor of the following page; empty on the last page.
	Next string
}
