// Package tiered puts two stores behind one store.Store: a durable store
// for jobs of full and process durability, and a memory store for jobs of
// memory durability, which are lost on restart. The engine sees one store;
// the tiers show through only where one call spans both:
//   - an insert batch may not mix memory jobs with others (it could not be
//     atomic across two stores);
//   - a claim across both hands out memory jobs first, then durable ones,
//     each tier in its own claim order;
//   - a listing pages through the durable jobs, then the memory ones.
//
// Queue settings (pause, durability, limits, settings) live in the
// durable store; pauses, limits and settings apply to both tiers, each
// tier holding the limits for its own jobs and applying the settings to
// them. A job that dies into a dead-letter queue leaves its copy in its
// own tier: the copy keeps the dead job's durability (job.DeadLetter), so
// a memory job's copy is a memory job, lost on restart like it. The
// copy's id is new and random (job.NewID) and skips the id registry of
// ids.go, whose read of the other tier each death would pay for a clash
// that 80 random bits make a non-event.
package tiered

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Tier is what each tier must offer besides store.Store: a read of many
// jobs by id beside its writer, so that an insert into one tier can look
// for its ids in the other.
type Tier interface {
	store.Store
	// JobGetMany returns the jobs of ids that exist, by id.
	JobGetMany(ctx context.Context, ids []string) (map[string]*job.Job, error)
}

// MemoryStore is what the memory tier must offer besides Tier: a cheap,
// memory-only way to tell whether it holds a job's lease, so that acks and
// heartbeats go to the right tier without a lookup in both.
type MemoryStore interface {
	Tier
	Active(id string) bool
}

// Store routes calls between a durable and a memory store. It is safe for
// concurrent use.
type Store struct {
	disk Tier
	mem  MemoryStore
	// used is set once the memory tier took a job; until then every call
	// goes to the durable store alone.
	used atomic.Bool
	// gate holds the first memory insert back until the durable inserts
	// that did not register their ids have ended (see ids.go).
	gate sync.RWMutex
	// ids registers the ids of the inserts in flight once used is set.
	ids *idGuard
	// config is held by a change of a queue's limits or settings from
	// its write in the durable tier to the memory tier's copy of the
	// result, so that the memory tier takes the changes in the durable
	// tier's order.
	config sync.Mutex
}

var _ store.Store = (*Store)(nil)

// New returns a store over disk and mem, which it owns: Close closes
// them. The memory store starts empty, so New gives it the durable store's
// paused queues. mem should take disk's fencing tokens, so that the two
// never hand out one token twice.
func New(ctx context.Context, disk Tier, mem MemoryStore) (*Store, error) {
	qs, err := disk.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	for _, q := range qs {
		if q.Paused {
			if err := mem.QueueSetPaused(ctx, q.Name, true); err != nil {
				return nil, fmt.Errorf("pause memory queue %s: %w", q.Name, err)
			}
		}
		if !q.Limits.IsZero() {
			if err := mem.QueueSetLimits(ctx, q.Name, q.Limits); err != nil {
				return nil, fmt.Errorf("limit memory queue %s: %w", q.Name, err)
			}
		}
		if !q.Settings.IsZero() {
			if err := mem.QueueSetSettings(ctx, q.Name, q.Settings); err != nil {
				return nil, fmt.Errorf("set the settings of memory queue %s: %w", q.Name, err)
			}
		}
	}
	if err := copyGroups(ctx, disk, mem); err != nil {
		return nil, err
	}
	return &Store{disk: disk, mem: mem, ids: newIDGuard()}, nil
}

// memCursor marks a listing cursor of the memory tier. Durable stores'
// cursors never contain a dot.
const memCursor = "m."

// JobInsertMany inserts into the tier of the jobs' durability, with ids
// one space across both tiers (see ids.go); see store.Inserter. The
// queues it creates (p.Create) are created in the durable tier, in the
// insert's operation when its jobs are durable and before it for memory
// jobs, and the memory tier then takes their configuration, as
// QueueSetLimits gives it: a failure between the tiers can leave a queue
// created without the insert's jobs, never jobs without their queue's
// configuration.
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	memory := 0
	for i := range p.Jobs {
		if p.Jobs[i].Durability == job.DurabilityMemory {
			memory++
		}
	}
	switch {
	case memory == 0:
		out, err := s.insertDurable(ctx, p)
		if err != nil {
			return nil, err
		}
		return out, s.mirrorCreated(ctx, p.Create, p.Now)
	case memory == len(p.Jobs):
		// The durable tier keeps the queues' configuration: it creates
		// them first, on their own, then the memory tier takes it.
		if len(p.Create) > 0 {
			if _, err := s.disk.JobInsertMany(ctx, &store.JobInsertManyParams{Create: p.Create, Now: p.Now}); err != nil {
				return nil, err
			}
			if err := s.mirrorCreated(ctx, p.Create, p.Now); err != nil {
				return nil, err
			}
			p = &store.JobInsertManyParams{Jobs: p.Jobs, Now: p.Now}
		}
		s.useMemory()
		return s.insertInto(ctx, p, s.mem, s.disk, true)
	}
	return nil, fmt.Errorf("insert jobs: %w", job.Invalid("jobs",
		"a batch cannot mix memory durability with other levels: the two are kept apart and the batch could not be atomic"))
}

// insertDurable inserts p, whose jobs are all durable, into the durable
// tier.
func (s *Store) insertDurable(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	if !s.used.Load() {
		s.gate.RLock()
		if !s.used.Load() {
			defer s.gate.RUnlock()
			return s.disk.JobInsertMany(ctx, p)
		}
		s.gate.RUnlock()
	}
	return s.insertInto(ctx, p, s.disk, s.mem, false)
}

// mirrorCreated gives the memory tier, for its own jobs, the
// configuration of the queues of create that the durable tier created
// with it, as QueueSetLimits and QueueSetSettings give it theirs.
func (s *Store) mirrorCreated(ctx context.Context, create []store.QueueConfig, now time.Time) error {
	var made []store.QueueConfig
	for _, c := range create {
		info, err := s.disk.QueueGet(ctx, c.Name)
		if err != nil {
			return fmt.Errorf("read created queue %s: %w", c.Name, err)
		}
		if info.Limits == c.Limits.Normalized() && info.Settings == c.Settings {
			made = append(made, c)
		}
	}
	if len(made) == 0 {
		return nil
	}
	if _, err := s.mem.JobInsertMany(ctx, &store.JobInsertManyParams{Create: made, Now: now}); err != nil {
		return fmt.Errorf("create queues in memory: %w", err)
	}
	return nil
}

// JobClaim hands out memory jobs first, then durable ones; see
// store.Claimer.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) (*store.ClaimResult, error) {
	if !s.used.Load() {
		return s.disk.JobClaim(ctx, p)
	}
	got, err := s.mem.JobClaim(ctx, p)
	if err != nil || len(got.Jobs) >= p.Max {
		return got, err
	}
	rest := *p
	rest.Max -= len(got.Jobs)
	more, err := s.disk.JobClaim(ctx, &rest)
	if err != nil {
		if len(got.Jobs) > 0 || len(got.Available) > 0 {
			// The memory jobs are leased already, and the ones it killed
			// left copies: hand them out, and say so.
			return got, nil
		}
		return nil, err
	}
	out := &store.ClaimResult{Jobs: append(got.Jobs, more.Jobs...), RetryAt: got.RetryAt, Capped: got.Capped,
		Available: got.Available}
	if out.RetryAt.IsZero() || (!more.RetryAt.IsZero() && more.RetryAt.Before(out.RetryAt)) {
		out.RetryAt = more.RetryAt
	}
	for _, q := range more.Capped {
		if !slices.Contains(out.Capped, q) {
			out.Capped = append(out.Capped, q)
		}
	}
	for _, q := range more.Available {
		if !slices.Contains(out.Available, q) {
			out.Available = append(out.Available, q)
		}
	}
	return out, nil
}

// split sends the items whose jobs are active in the memory tier there
// and the others to the durable store, and puts the outcomes back in
// order.
func split[T any](s *Store, items []T, id func(*T) string, run func(st store.Store, items []T) ([]job.Outcome, error)) ([]job.Outcome, error) {
	if !s.used.Load() {
		return run(s.disk, items)
	}
	var memIdx, diskIdx []int
	for i := range items {
		if s.mem.Active(id(&items[i])) {
			memIdx = append(memIdx, i)
		} else {
			diskIdx = append(diskIdx, i)
		}
	}
	if len(diskIdx) == 0 {
		return run(s.mem, items)
	}
	var out []job.Outcome
	if len(memIdx) == 0 {
		var err error
		if out, err = run(s.disk, items); err != nil {
			return nil, err
		}
	} else {
		out = make([]job.Outcome, len(items))
		if err := runPart(s.mem, items, memIdx, out, run); err != nil {
			return nil, err
		}
		if err := runPart(s.disk, items, diskIdx, out, run); err != nil {
			return nil, err
		}
	}
	// A memory job that is no longer active (acked already, or rescued)
	// went to the durable store, which does not know it: the memory tier
	// answers for it, lease_lost as for any job.
	var unknown []int
	for _, i := range diskIdx {
		if errors.Is(out[i].Err, job.ErrNotFound) {
			unknown = append(unknown, i)
		}
	}
	if err := runPart(s.mem, items, unknown, out, run); err != nil {
		return nil, err
	}
	return out, nil
}

// runPart runs the items at idx on st and puts their outcomes in out.
func runPart[T any](st store.Store, items []T, idx []int, out []job.Outcome, run func(st store.Store, items []T) ([]job.Outcome, error)) error {
	if len(idx) == 0 {
		return nil
	}
	sub := make([]T, len(idx))
	for k, i := range idx {
		sub[k] = items[i]
	}
	res, err := run(st, sub)
	if err != nil {
		return err
	}
	for k, i := range idx {
		out[i] = res[k]
	}
	return nil
}

// JobComplete acknowledges jobs in their tiers; see store.Claimer.
func (s *Store) JobComplete(ctx context.Context, p *store.JobCompleteParams) ([]job.Outcome, error) {
	return split(s, p.Items, func(it *job.CompleteItem) string { return it.ID },
		func(st store.Store, items []job.CompleteItem) ([]job.Outcome, error) {
			return st.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: p.Now})
		})
}

// JobFail records failed attempts in their tiers; see store.Claimer.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) ([]job.Outcome, error) {
	return split(s, p.Items, func(it *job.FailItem) string { return it.ID },
		func(st store.Store, items []job.FailItem) ([]job.Outcome, error) {
			return st.JobFail(ctx, &store.JobFailParams{Items: items, Now: p.Now, Rand: p.Rand})
		})
}

// JobExtend extends leases in their tiers; see store.Claimer.
func (s *Store) JobExtend(ctx context.Context, p *store.JobExtendParams) ([]job.Outcome, error) {
	return split(s, p.Items, func(it *job.ExtendItem) string { return it.ID },
		func(st store.Store, items []job.ExtendItem) ([]job.Outcome, error) {
			return st.JobExtend(ctx, &store.JobExtendParams{Items: items, Now: p.Now})
		})
}

// JobRelease hands jobs back in their tiers; see store.Claimer.
func (s *Store) JobRelease(ctx context.Context, p *store.JobReleaseParams) ([]job.Outcome, error) {
	return split(s, p.Items, func(it *job.ReleaseItem) string { return it.ID },
		func(st store.Store, items []job.ReleaseItem) ([]job.Outcome, error) {
			return st.JobRelease(ctx, &store.JobReleaseParams{Items: items, Now: p.Now})
		})
}

// JobProgress stores a progress report in the job's tier; see
// store.Claimer.
func (s *Store) JobProgress(ctx context.Context, p *store.JobProgressParams) error {
	if s.used.Load() && s.mem.Active(p.ID) {
		return s.mem.JobProgress(ctx, p)
	}
	err := s.disk.JobProgress(ctx, p)
	if errors.Is(err, job.ErrNotFound) && s.used.Load() {
		return s.mem.JobProgress(ctx, p)
	}
	return err
}

// byID runs call on the durable store and, when it does not know the job,
// on the memory tier.
func byID[T any](s *Store, call func(st store.Store) (T, error)) (T, error) {
	v, err := call(s.disk)
	if err == nil || !errors.Is(err, job.ErrNotFound) || !s.used.Load() {
		return v, err
	}
	return call(s.mem)
}

// JobGet returns one job from either tier; see store.Admin.
func (s *Store) JobGet(ctx context.Context, id string) (*job.Job, error) {
	return byID(s, func(st store.Store) (*job.Job, error) { return st.JobGet(ctx, id) })
}

// JobCancel cancels a job in its tier; see store.Admin.
func (s *Store) JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return byID(s, func(st store.Store) (*job.Job, error) { return st.JobCancel(ctx, id, now) })
}

// JobRetry retries a job in its tier; see store.Admin.
func (s *Store) JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return byID(s, func(st store.Store) (*job.Job, error) { return st.JobRetry(ctx, id, now) })
}

// JobDelete deletes a job from its tier; see store.Admin.
func (s *Store) JobDelete(ctx context.Context, id string) error {
	_, err := byID(s, func(st store.Store) (struct{}, error) { return struct{}{}, st.JobDelete(ctx, id) })
	return err
}

// JobList pages through the durable jobs, then the memory ones; see
// store.Admin.
func (s *Store) JobList(ctx context.Context, p *job.ListParams) (*job.ListPage, error) {
	if rest, ok := strings.CutPrefix(p.Cursor, memCursor); ok {
		q := *p
		q.Cursor = rest
		return s.memPage(ctx, &q)
	}
	page, err := s.disk.JobList(ctx, p)
	if err != nil || page.Next != "" || !s.used.Load() {
		return page, err
	}
	q := *p
	q.Cursor, q.Limit = "", p.PageSize()-len(page.Jobs)
	if q.Limit <= 0 {
		// The durable jobs filled the page: the memory ones come next.
		probe := *p
		probe.Cursor, probe.Limit = "", 1
		if more, err := s.mem.JobList(ctx, &probe); err == nil && len(more.Jobs) > 0 {
			page.Next = memCursor
		}
		return page, nil
	}
	mem, err := s.memPage(ctx, &q)
	if err != nil {
		return nil, err
	}
	page.Jobs = append(page.Jobs, mem.Jobs...)
	page.Next = mem.Next
	return page, nil
}

func (s *Store) memPage(ctx context.Context, p *job.ListParams) (*job.ListPage, error) {
	page, err := s.mem.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	if page.Next != "" {
		page.Next = memCursor + page.Next
	}
	return page, nil
}

// JobCountActiveByWorker counts the active jobs of each named worker in
// both tiers; see store.Admin.
func (s *Store) JobCountActiveByWorker(ctx context.Context, p *store.JobCountActiveByWorkerParams) (map[string]int, error) {
	out, err := s.disk.JobCountActiveByWorker(ctx, p)
	if err != nil || !s.used.Load() {
		return out, err
	}
	mem, err := s.mem.JobCountActiveByWorker(ctx, p)
	if err != nil {
		return nil, err
	}
	for w, n := range mem {
		out[w] += n
	}
	return out, nil
}

// JobRetryMany retries in both tiers; see store.Admin.
func (s *Store) JobRetryMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	return s.both(func(st store.Store) (int, error) { return st.JobRetryMany(ctx, p) })
}

// JobDeleteMany deletes in both tiers; see store.Admin.
func (s *Store) JobDeleteMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	return s.both(func(st store.Store) (int, error) { return st.JobDeleteMany(ctx, p) })
}

// QueuePurge purges both tiers; see store.Admin.
func (s *Store) QueuePurge(ctx context.Context, name string) (int, error) {
	return s.both(func(st store.Store) (int, error) { return st.QueuePurge(ctx, name) })
}

// both runs a counting call on both tiers and sums the counts.
func (s *Store) both(call func(st store.Store) (int, error)) (int, error) {
	n, err := call(s.disk)
	if err != nil || !s.used.Load() {
		return n, err
	}
	m, err := call(s.mem)
	return n + m, err
}

// QueueList lists the queues of both tiers with their counts summed and
// the settings of the durable store; see store.Admin.
func (s *Store) QueueList(ctx context.Context) ([]job.QueueInfo, error) {
	qs, err := s.disk.QueueList(ctx)
	if err != nil || !s.used.Load() {
		return qs, err
	}
	mem, err := s.mem.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]int, len(qs))
	for i := range qs {
		byName[qs[i].Name] = i
	}
	for _, m := range mem {
		i, ok := byName[m.Name]
		if !ok {
			m.Durability = job.DurabilityFull
			qs = append(qs, m)
			continue
		}
		for st, n := range m.Counts {
			qs[i].Counts[st] += n
		}
		if o := m.OldestAvailable; !o.IsZero() && (qs[i].OldestAvailable.IsZero() || o.Before(qs[i].OldestAvailable)) {
			qs[i].OldestAvailable = o
		}
	}
	sortQueues(qs)
	return qs, nil
}

// QueueGet returns a queue known to either tier; see store.Admin.
func (s *Store) QueueGet(ctx context.Context, name string) (*job.QueueInfo, error) {
	q, err := s.disk.QueueGet(ctx, name)
	if !s.used.Load() || (err != nil && !errors.Is(err, job.ErrNotFound)) {
		return q, err
	}
	m, merr := s.mem.QueueGet(ctx, name)
	switch {
	case merr != nil && !errors.Is(merr, job.ErrNotFound):
		return nil, merr
	case merr != nil:
		return q, err
	case err != nil:
		m.Durability = job.DurabilityFull
		return m, nil
	}
	for st, n := range m.Counts {
		q.Counts[st] += n
	}
	return q, nil
}

// QueueDefaults returns what the queue gives its new jobs: the durable
// tier holds every queue's durability and settings; see store.Admin.
func (s *Store) QueueDefaults(ctx context.Context, name string) (store.QueueDefaults, error) {
	return s.disk.QueueDefaults(ctx, name)
}

// QueueSetPaused pauses or resumes the queue in both tiers; see
// store.Admin.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) error {
	if err := s.disk.QueueSetPaused(ctx, name, paused); err != nil {
		return err
	}
	return s.mem.QueueSetPaused(ctx, name, paused)
}

// QueueSetLimits sets the queue's limits in both tiers, each of which
// holds them for its own jobs; see store.Admin.
func (s *Store) QueueSetLimits(ctx context.Context, name string, l job.Limits) error {
	s.config.Lock()
	defer s.config.Unlock()
	if err := s.disk.QueueSetLimits(ctx, name, l); err != nil {
		return err
	}
	return s.mem.QueueSetLimits(ctx, name, l)
}

// QueuePatchLimits patches the queue's limits in the durable tier, which
// keeps the queues' configuration, and gives the memory tier the limits
// that came out; see store.Admin.
func (s *Store) QueuePatchLimits(ctx context.Context, name string, p job.LimitsPatch) (job.Limits, error) {
	s.config.Lock()
	defer s.config.Unlock()
	l, err := s.disk.QueuePatchLimits(ctx, name, p)
	if err != nil {
		return job.Limits{}, err
	}
	return l, s.mem.QueueSetLimits(ctx, name, l)
}

// QueueSetSettings sets the queue's settings in both tiers, each of which
// applies them to its own jobs; see store.Admin.
func (s *Store) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	s.config.Lock()
	defer s.config.Unlock()
	if err := s.disk.QueueSetSettings(ctx, name, st); err != nil {
		return err
	}
	return s.mem.QueueSetSettings(ctx, name, st)
}

// QueuePatchSettings patches the queue's settings in the durable tier,
// which keeps the queues' configuration, and gives the memory tier the
// settings that came out; see store.Admin.
func (s *Store) QueuePatchSettings(ctx context.Context, name string, p job.SettingsPatch) (job.QueueSettings, error) {
	s.config.Lock()
	defer s.config.Unlock()
	st, err := s.disk.QueuePatchSettings(ctx, name, p)
	if err != nil {
		return job.QueueSettings{}, err
	}
	return st, s.mem.QueueSetSettings(ctx, name, st)
}

// QueueSetDurability sets the queue's level in the durable store, which
// keeps the queues' settings; see store.Admin.
func (s *Store) QueueSetDurability(ctx context.Context, name string, d job.Durability) error {
	return s.disk.QueueSetDurability(ctx, name, d)
}

// JobPromoteDue promotes in both tiers; see store.Maintainer.
func (s *Store) JobPromoteDue(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(func(st store.Store) (*store.MaintenanceResult, error) { return st.JobPromoteDue(ctx, now, limit) })
}

// JobRescueExpired rescues in both tiers; see store.Maintainer.
func (s *Store) JobRescueExpired(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(func(st store.Store) (*store.MaintenanceResult, error) { return st.JobRescueExpired(ctx, now, limit) })
}

// maintain runs a maintenance pass on both tiers and merges the results.
func (s *Store) maintain(pass func(st store.Store) (*store.MaintenanceResult, error)) (*store.MaintenanceResult, error) {
	res, err := pass(s.disk)
	if err != nil || !s.used.Load() {
		return res, err
	}
	m, err := pass(s.mem)
	if err != nil {
		return nil, err
	}
	out := *res
	out.Count += m.Count
	for _, q := range m.Available {
		if !slices.Contains(out.Available, q) {
			out.Available = append(out.Available, q)
		}
	}
	if out.Next.IsZero() || (!m.Next.IsZero() && m.Next.Before(out.Next)) {
		out.Next = m.Next
	}
	if len(m.Rescued) > 0 {
		out.Rescued = maps.Clone(out.Rescued)
		if out.Rescued == nil {
			out.Rescued = make(map[string]int, len(m.Rescued))
		}
		for q, n := range m.Rescued {
			out.Rescued[q] += n
		}
	}
	return &out, nil
}

// JobExpireWaiting kills the jobs past their maximum waits in both
// tiers; see store.Maintainer.
func (s *Store) JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(func(st store.Store) (*store.MaintenanceResult, error) { return st.JobExpireWaiting(ctx, now, limit) })
}

// JobPrune prunes both tiers; see store.Maintainer.
func (s *Store) JobPrune(ctx context.Context, p *store.JobPruneParams) (int, error) {
	return s.both(func(st store.Store) (int, error) { return st.JobPrune(ctx, p) })
}

// Capabilities are the durable store's.
func (s *Store) Capabilities() store.Capabilities { return s.disk.Capabilities() }

// Ping checks both tiers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.disk.Ping(ctx); err != nil {
		return err
	}
	return s.mem.Ping(ctx)
}

// Close closes both tiers.
func (s *Store) Close() error {
	// The memory tier takes the durable store's tokens: it closes first.
	return errors.Join(s.mem.Close(), s.disk.Close())
}

func sortQueues(qs []job.QueueInfo) {
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
}
