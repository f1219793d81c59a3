package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// EnqueueRequest is one job to enqueue as a client gave it. Zero values mean
// "use the default" except where noted.
type EnqueueRequest struct {
	// ID makes the enqueue idempotent when set; generated otherwise.
	ID string
	// Queue defaults to DefaultQueue.
	Queue string
	// Kind is required.
	Kind string
	// Payload is any JSON value; nil means null.
	Payload json.RawMessage
	// Priority: higher runs first. Zero is the default.
	Priority int
	// RunAt, when set, is when the job becomes available. Not with Delay.
	RunAt time.Time
	// Delay, when set, makes the job available this long from now. With
	// neither RunAt nor Delay the job takes its queue's default delay
	// (job.QueueSettings.DefaultDelay), else it is available at once.
	Delay time.Duration
	// MaxAttempts defaults to the queue's default maximum attempts, else
	// DefaultMaxAttempts.
	MaxAttempts int
	// Backoff overrides parts of DefaultBackoff.
	Backoff BackoffRequest
	// LeaseDuration defaults to the queue's default lease, else
	// DefaultLease.
	LeaseDuration time.Duration
	// UniqueKey makes the job unique in its queue; see store.Inserter.
	UniqueKey string
	// UniqueFor is the uniqueness window; zero means while pending.
	UniqueFor time.Duration
	// Tags label the job.
	Tags []string
	// Group is the job's group (a tenant, a customer): at
	// most MaxGroupBytes bytes of Unicode without NUL. Empty: none.
	Group string
	// Durability is how the job is kept; empty takes its queue's level.
	Durability job.Durability
	// TraceParent is the W3C traceparent of the trace the job continues
	// (job.ValidTraceParent), kept with the job and its copies. Empty:
	// none.
	TraceParent string
	// PayloadValid says Payload is known to be one valid JSON value (it was
	// decoded from a JSON request body), so the engine checks only its
	// size and does not scan it again.
	PayloadValid bool
}

// BackoffRequest overrides parts of the default backoff; nil fields keep
// the default.
type BackoffRequest struct {
	Kind   job.BackoffKind
	Base   *time.Duration
	Max    *time.Duration
	Jitter *float64
}

// EnqueueResult is the outcome of one enqueued job.
type EnqueueResult struct {
	ID        string
	State     job.State
	RunAt     time.Time
	Duplicate bool
}

// Enqueue stores one job. Invalid input gives an *job.InputError naming the
// field.
func (e *Engine) Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	res, err := e.enqueue(ctx, []EnqueueRequest{req}, "")
	if err != nil {
		return EnqueueResult{}, singleField(err)
	}
	return res[0], nil
}

// singleField names the field of an input error about the only job of a
// single enqueue as the single form does ("durability", not
// "jobs[0].durability"): stores name fields by batch item.
func singleField(err error) error {
	var in *job.InputError
	var taken *job.IDTakenError
	switch {
	case errors.As(err, &in):
		if f, ok := strings.CutPrefix(in.Field, "jobs[0]."); ok {
			return &job.InputError{Field: f, Message: in.Message}
		}
	case errors.As(err, &taken):
		if f, ok := strings.CutPrefix(taken.Field, "jobs[0]."); ok {
			return &job.IDTakenError{Field: f}
		}
	}
	return err
}

// EnqueueBatch stores up to MaxBatch jobs atomically: all or none. Errors
// name the item, as in "jobs[3].kind".
func (e *Engine) EnqueueBatch(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	if len(reqs) == 0 {
		return nil, job.Invalid("jobs", "must hold at least one job")
	}
	if len(reqs) > e.cfg.MaxBatch {
		return nil, &BatchTooLargeError{Field: "jobs", Max: e.cfg.MaxBatch, Got: len(reqs)}
	}
	return e.enqueue(ctx, reqs, "jobs")
}

// BatchTooLargeError is a batch with more items than the engine allows.
type BatchTooLargeError struct {
	Field    string
	Max, Got int
}

// Error implements error.
func (e *BatchTooLargeError) Error() string {
	return fmt.Sprintf("%s: %d items, at most %d allowed", e.Field, e.Got, e.Max)
}

// PayloadTooLargeError is a payload, result or progress over the limit.
type PayloadTooLargeError struct {
	Field    string
	Max, Got int
}

// Error implements error.
func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("%s: %d bytes, at most %d allowed", e.Field, e.Got, e.Max)
}

func (e *Engine) enqueue(ctx context.Context, reqs []EnqueueRequest, prefix string) ([]EnqueueResult, error) {
	return e.enqueueCreating(ctx, reqs, prefix, nil)
}

// enqueueCreating is enqueue, creating the new queues of reqs as
// newQueues says (nil: as every enqueue does, without configuration).
func (e *Engine) enqueueCreating(ctx context.Context, reqs []EnqueueRequest, prefix string, newQueues NewQueues) ([]EnqueueResult, error) {
	now := e.Now()
	jobs, create, err := e.prepareJobs(ctx, reqs, prefix, now, newQueues)
	if err != nil {
		return nil, err
	}
	return e.insertCreating(ctx, jobs, create, now)
}

// insert stores jobs, prepared at now, in one atomic insert, then wakes
// their queues' fetches and the scheduler and tells of them.
func (e *Engine) insert(ctx context.Context, jobs []store.JobInsertParams, now time.Time) ([]EnqueueResult, error) {
	return e.insertCreating(ctx, jobs, nil, now)
}

// insertCreating is insert, creating the queues of create in the same
// atomic insert.
func (e *Engine) insertCreating(ctx context.Context, jobs []store.JobInsertParams, create []store.QueueConfig, now time.Time) ([]EnqueueResult, error) {
	results, err := e.st.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: jobs, Create: create, Now: now})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	e.inserted(results)
	e.emitInserted(results, now)
	return enqueueResults(results), nil
}

// prepareJobs validates reqs and turns them into the jobs to insert at
// now, with their queues' defaults and the engine's applied
// (applyQueueDefaults), and, with newQueues, the queues to create with
// them. Errors name the field of the request at fault under prefix
// ("jobs[3].kind"), or bare ("kind") when prefix is empty; a failure to
// read a queue's defaults is returned wrapped.
func (e *Engine) prepareJobs(ctx context.Context, reqs []EnqueueRequest, prefix string, now time.Time,
	newQueues NewQueues) ([]store.JobInsertParams, []store.QueueConfig, error) {
	jobs := make([]store.JobInsertParams, len(reqs))
	for i := range reqs {
		field := func(name string) string {
			if prefix == "" {
				return name
			}
			return fmt.Sprintf("%s[%d].%s", prefix, i, name)
		}
		if err := e.prepare(&reqs[i], &jobs[i], now, field); err != nil {
			return nil, nil, err
		}
	}
	create, err := e.applyQueueDefaultsCreating(ctx, jobs, now, newQueues)
	if err != nil {
		return nil, nil, err
	}
	return jobs, create, nil
}

// enqueueResults are the answers to the inserts of results.
func enqueueResults(results []store.InsertResult) []EnqueueResult {
	out := make([]EnqueueResult, len(results))
	for i, r := range results {
		out[i] = EnqueueResult{ID: r.Job.ID, State: r.Job.State, RunAt: r.Job.RunAt, Duplicate: r.Duplicate}
	}
	return out
}

// reservedIDs are the fixed path segments under /v1/jobs, which a job id
// must not shadow.
var reservedIDs = map[string]bool{"batch": true, "ack": true, "fail": true, "extend": true, "release": true}

// prepare validates req and fills p with it and the defaults that do not
// depend on the queue. What a queue may default is left zero when req
// leaves it out, for applyQueueDefaults to fill: the durability, the
// lease, the maximum attempts and the run time (and so the state, which
// p does not get here).
func (e *Engine) prepare(req *EnqueueRequest, p *store.JobInsertParams, now time.Time, field func(string) string) error {
	p.ID = req.ID
	if p.ID == "" {
		p.ID, p.FreshID = job.NewID(now), true
	} else if !job.ValidName(p.ID) {
		return job.Invalid(field("id"), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	} else if reservedIDs[p.ID] {
		return job.Invalid(field("id"), "%q is reserved: it names a route under /v1/jobs", p.ID)
	}
	p.Queue = req.Queue
	if p.Queue == "" {
		p.Queue = DefaultQueue
	} else if !job.ValidName(p.Queue) {
		return job.Invalid(field("queue"), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	}
	if req.Kind == "" {
		return job.Invalid(field("kind"), "is required")
	}
	if !job.ValidName(req.Kind) {
		return job.Invalid(field("kind"), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	}
	p.Kind = req.Kind
	payload, err := e.checkJSON(req.Payload, req.PayloadValid, field("payload"))
	if err != nil {
		return err
	}
	p.Payload = payload
	if req.Priority < -MaxPriority || req.Priority > MaxPriority {
		return job.Invalid(field("priority"), "must be between %d and %d", -MaxPriority, MaxPriority)
	}
	p.Priority = req.Priority
	switch {
	case !req.RunAt.IsZero() && req.Delay != 0:
		return job.Invalid(field("delay_ms"), "cannot be combined with run_at")
	case req.Delay < 0 || req.Delay > MaxDelay:
		return job.Invalid(field("delay_ms"), "must be between 0 and %d", MaxDelay.Milliseconds())
	case !req.RunAt.IsZero():
		if req.RunAt.After(now.Add(MaxDelay)) {
			return job.Invalid(field("run_at"), "must be at most one year ahead")
		}
		p.RunAt = req.RunAt.UTC()
	case req.Delay > 0:
		p.RunAt = now.Add(req.Delay)
	}
	p.MaxAttempts = req.MaxAttempts
	if p.MaxAttempts != 0 && (p.MaxAttempts < 1 || p.MaxAttempts > MaxAttempts) {
		return job.Invalid(field("max_attempts"), "must be between 1 and %d", MaxAttempts)
	}
	if p.Backoff, err = resolveBackoff(req.Backoff, field); err != nil {
		return err
	}
	p.LeaseDuration = req.LeaseDuration
	if p.LeaseDuration != 0 {
		if err := checkLease(p.LeaseDuration, field("lease_ms")); err != nil {
			return err
		}
	}
	if len(req.UniqueKey) > MaxUniqueKeyBytes {
		return job.Invalid(field("unique_key"), "must be at most %d bytes", MaxUniqueKeyBytes)
	}
	if strings.IndexByte(req.UniqueKey, 0) >= 0 {
		return job.Invalid(field("unique_key"), "must not contain U+0000 (NUL), which not every store can keep")
	}
	p.UniqueKey = req.UniqueKey
	if req.UniqueFor < 0 || req.UniqueFor > MaxDelay {
		return job.Invalid(field("unique_for_ms"), "must be between 0 and %d", MaxDelay.Milliseconds())
	}
	if req.UniqueFor > 0 && req.UniqueKey == "" {
		return job.Invalid(field("unique_for_ms"), "needs unique_key")
	}
	p.UniqueFor = req.UniqueFor
	if len(req.Tags) > job.MaxTags {
		return job.Invalid(field("tags"), "at most %d tags allowed", job.MaxTags)
	}
	for i, tag := range req.Tags {
		if !job.ValidName(tag) {
			return job.Invalid(field(fmt.Sprintf("tags[%d]", i)), "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
		}
	}
	p.Tags = req.Tags
	if err := checkGroup(req.Group, field("group")); err != nil {
		return err
	}
	p.Group = req.Group
	if req.Durability != "" && !req.Durability.Valid() {
		return job.Invalid(field("durability"), "must be full, process or memory")
	}
	p.Durability = req.Durability
	if req.TraceParent != "" && !job.ValidTraceParent(req.TraceParent) {
		return job.Invalid(field("traceparent"), TraceParentRule)
	}
	p.TraceParent = req.TraceParent
	return nil
}

// TraceParentRule is what a traceparent must be, as errors say it.
const TraceParentRule = "must be a W3C traceparent: 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, " +
	"in lower case, neither id all zeros"

// queueDefaults are what a queue gives the jobs enqueued into it without
// their own values: its durability level and its settings' job defaults.
type queueDefaults struct {
	durability job.Durability
	settings   job.QueueSettings
}

// applyQueueDefaults completes jobs, as prepare left them, for an insert
// at now. A value the request gave wins; else the queue's: its level for
// the durability (full for an unknown queue), its settings' default lease,
// maximum attempts and delay; else the engine's (applyDefaults). Each
// queue is read once per call, and only when one of its jobs needs a
// default. A failure to read a queue is returned wrapped, since jobs
// inserted without their queue's defaults would be the wrong jobs.
func (e *Engine) applyQueueDefaults(ctx context.Context, jobs []store.JobInsertParams, now time.Time) error {
	_, err := e.applyQueueDefaultsCreating(ctx, jobs, now, nil)
	return err
}

// applyQueueDefaultsCreating is applyQueueDefaults that, with newQueues,
// reads the queue of every job and returns the queues to create with the
// jobs: each that does not exist, with the configuration newQueues gives
// it, whose settings give its jobs their defaults.
func (e *Engine) applyQueueDefaultsCreating(ctx context.Context, jobs []store.JobInsertParams, now time.Time,
	newQueues NewQueues) ([]store.QueueConfig, error) {
	var create []store.QueueConfig
	// The defaults read, by queue: the first queue's kept apart, so that
	// the jobs of one queue (a single enqueue above all) need no map.
	var (
		first    string
		firstDef queueDefaults
		read     bool
		others   map[string]queueDefaults
	)
	for i := range jobs {
		p := &jobs[i]
		var d queueDefaults
		if newQueues != nil || needsQueue(p) {
			var ok bool
			if read && p.Queue == first {
				d = firstDef
			} else if d, ok = others[p.Queue]; !ok {
				var found bool
				var err error
				if d, found, err = e.readQueueDefaults(ctx, p.Queue); err != nil {
					return nil, err
				}
				if !found && newQueues != nil {
					c, err := e.newQueueConfig(p.Queue, newQueues)
					if err != nil {
						return nil, err
					}
					create = append(create, c)
					d.settings = c.Settings
				}
				switch {
				case !read:
					first, firstDef, read = p.Queue, d, true
				case others == nil:
					others = map[string]queueDefaults{p.Queue: d}
				default:
					others[p.Queue] = d
				}
			}
		}
		if p.Durability == "" {
			p.Durability = d.durability
		}
		applyDefaults(p, d.settings, now)
	}
	return create, nil
}

// needsQueue reports whether p, as prepare left it, takes a default its
// queue may set.
func needsQueue(p *store.JobInsertParams) bool {
	return p.Durability == "" || p.LeaseDuration == 0 || p.MaxAttempts == 0 || p.RunAt.IsZero()
}

// readQueueDefaults reads what queue name gives its jobs, and whether the
// queue exists; an unknown queue gives full durability and no settings.
func (e *Engine) readQueueDefaults(ctx context.Context, name string) (queueDefaults, bool, error) {
	q, err := e.st.QueueDefaults(ctx, name)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return queueDefaults{durability: job.DurabilityFull}, false, nil
	case err != nil:
		return queueDefaults{}, false, fmt.Errorf("read the defaults of queue %s: %w", name, err)
	}
	d := queueDefaults{durability: q.Durability, settings: q.Settings}
	if d.durability == "" {
		d.durability = job.DurabilityFull
	}
	return d, true, nil
}

// applyDefaults fills the lease, maximum attempts and run time that p's
// request left out, each from the queue's settings s when they set it,
// else from the engine's defaults, and gives p its state at now: a job
// whose run time (its own, or now plus the queue's default delay) lies
// ahead is scheduled, any other available from now.
func applyDefaults(p *store.JobInsertParams, s job.QueueSettings, now time.Time) {
	if p.LeaseDuration == 0 {
		p.LeaseDuration = cmp.Or(s.DefaultLease, DefaultLease)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = cmp.Or(s.DefaultMaxAttempts, DefaultMaxAttempts)
	}
	if p.RunAt.IsZero() {
		p.RunAt = now.Add(s.DefaultDelay)
	}
	p.State = job.StateAvailable
	if p.RunAt.After(now) {
		p.State = job.StateScheduled
	} else {
		p.RunAt = now
	}
}

func resolveBackoff(req BackoffRequest, field func(string) string) (job.Backoff, error) {
	b := DefaultBackoff
	switch req.Kind {
	case "":
	case job.BackoffFixed, job.BackoffExponential:
		b.Kind = req.Kind
	default:
		return b, job.Invalid(field("backoff.type"), "must be fixed or exponential")
	}
	if req.Base != nil {
		if *req.Base < 0 || *req.Base > MaxBackoffBase {
			return b, job.Invalid(field("backoff.base_ms"), "must be between 0 and %d", MaxBackoffBase.Milliseconds())
		}
		b.Base = *req.Base
		if req.Max == nil && b.Max < b.Base {
			b.Max = b.Base
		}
	}
	if req.Max != nil {
		if *req.Max < b.Base || *req.Max > MaxDelay {
			return b, job.Invalid(field("backoff.max_ms"), "must be between base_ms and %d", MaxDelay.Milliseconds())
		}
		b.Max = *req.Max
	}
	if req.Jitter != nil {
		if !(*req.Jitter >= 0 && *req.Jitter <= 1) {
			return b, job.Invalid(field("backoff.jitter"), "must be between 0 and 1")
		}
		b.Jitter = *req.Jitter
	}
	return b, nil
}

func checkLease(d time.Duration, field string) error {
	if d < MinLease || d > MaxLease {
		return job.Invalid(field, "must be between %d and %d", MinLease.Milliseconds(), MaxLease.Milliseconds())
	}
	return nil
}

var jsonNull = json.RawMessage("null")

// checkJSON bounds and validates a JSON value (known valid when valid is
// set); nil or empty becomes null.
func (e *Engine) checkJSON(raw json.RawMessage, valid bool, field string) (json.RawMessage, error) {
	if len(raw) == 0 {
		return jsonNull, nil
	}
	if len(raw) > e.cfg.MaxPayloadBytes {
		return nil, &PayloadTooLargeError{Field: field, Max: e.cfg.MaxPayloadBytes, Got: len(raw)}
	}
	if !valid && !json.Valid(raw) {
		return nil, job.Invalid(field, "must be valid JSON")
	}
	return bytes.TrimSpace(raw), nil
}

// inserted wakes the fetches of queues that got available jobs and the
// scheduler for jobs that wait for their run time.
func (e *Engine) inserted(res []store.InsertResult) {
	var available []string
	var earliest time.Time
	for _, r := range res {
		if r.Duplicate {
			continue
		}
		switch r.Job.State {
		case job.StateAvailable:
			if len(available) == 0 || available[len(available)-1] != r.Job.Queue {
				available = append(available, r.Job.Queue)
			}
		case job.StateScheduled:
			if earliest.IsZero() || r.Job.RunAt.Before(earliest) {
				earliest = r.Job.RunAt
			}
		}
	}
	e.NotifyAvailable(available)
	if !earliest.IsZero() {
		e.scheduled(earliest)
	}
}

// checkGroup refuses a group that no job may have: longer
// than MaxGroupBytes, or not Unicode without NUL. The empty group, none,
// passes. The error names field.
func checkGroup(g, field string) error {
	if len(g) > MaxGroupBytes || strings.IndexByte(g, 0) >= 0 || !utf8.ValidString(g) {
		return job.Invalid(field, "must be 1-%d bytes of Unicode without U+0000 (NUL)", MaxGroupBytes)
	}
	return nil
}

// EnqueueOutcome is what became of one job of EnqueueEach: its result,
// or the error its own Enqueue would have given.
type EnqueueOutcome struct {
	Result EnqueueResult
	Err    error
}

// EnqueueEach stores each of reqs as if by its own Enqueue, all at once:
// each job succeeds or fails on its own, and each outcome, error fields
// included, is the one its Enqueue would give. It is for single enqueues
// that arrive together (a stream's frames): the jobs of each durability
// level share one insert, so that they cost the store one operation.
// A job with an id or a unique key, whose insert may depend on the jobs
// inserted before it, is enqueued on its own, alongside; and should a
// shared insert fail, each of its jobs is inserted again on its own, so
// that one job's failure is never another's.
func (e *Engine) EnqueueEach(ctx context.Context, reqs []EnqueueRequest) []EnqueueOutcome {
	out := make([]EnqueueOutcome, len(reqs))
	now := e.Now()
	jobs := make([]store.JobInsertParams, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // the request of each of jobs
	var wg sync.WaitGroup
	for i := range reqs {
		if reqs[i].ID != "" || reqs[i].UniqueKey != "" {
			wg.Go(func() { out[i].Result, out[i].Err = e.Enqueue(ctx, reqs[i]) })
			continue
		}
		jobs = append(jobs, store.JobInsertParams{})
		if err := e.prepare(&reqs[i], &jobs[len(jobs)-1], now, bareField); err != nil {
			jobs = jobs[:len(jobs)-1]
			out[i].Err = err
			continue
		}
		index = append(index, i)
	}
	if err := e.applyQueueDefaults(ctx, jobs, now); err != nil {
		for _, i := range index {
			out[i].Err = err
		}
		jobs = nil
	}
	// One insert per durability level, since a batch may not mix memory
	// with the others and the strongest level of a batch sets its wait:
	// the first level's on this goroutine, any other alongside.
	for len(jobs) > 0 {
		level := jobs[0].Durability
		k := 1
		for k < len(jobs) && jobs[k].Durability == level {
			k++
		}
		if k == len(jobs) {
			e.insertEach(ctx, jobs, index, now, out)
			break
		}
		var same, rest []store.JobInsertParams
		var sameIndex, restIndex []int
		for k := range jobs {
			if jobs[k].Durability == level {
				same, sameIndex = append(same, jobs[k]), append(sameIndex, index[k])
			} else {
				rest, restIndex = append(rest, jobs[k]), append(restIndex, index[k])
			}
		}
		wg.Go(func() { e.insertEach(ctx, same, sameIndex, now, out) })
		jobs, index = rest, restIndex
	}
	wg.Wait()
	return out
}

// bareField names a field of a single enqueue: as it is.
func bareField(name string) string { return name }

// insertEach inserts jobs, prepared at now for the requests index names,
// in one insert, and records each job's outcome in out; should that
// insert fail, it inserts each job on its own instead.
func (e *Engine) insertEach(ctx context.Context, jobs []store.JobInsertParams, index []int, now time.Time, out []EnqueueOutcome) {
	results, err := e.insert(ctx, jobs, now)
	if err != nil && len(jobs) > 1 {
		for k := range jobs {
			e.insertEach(ctx, jobs[k:k+1], index[k:k+1], now, out)
		}
		return
	}
	if err != nil {
		out[index[0]].Err = singleField(err)
		return
	}
	for k, r := range results {
		out[index[k]].Result = r
	}
}
