// Package store defines the storage contract of Spool: the Store interface
// that every backend (embedded SQLite, PostgreSQL) implements, its small role
// interfaces and the *Params structs its methods take.
//
// Contract common to every method:
//   - Each call is one atomic operation: it commits entirely or not at all
//     (batch acks, fails and extends are atomic per item, see their docs).
//   - A call answers only after its commit is durable at the store's
//     configured level (default: fsynced).
//   - Errors wrap the sentinels of package job: job.ErrNotFound,
//     job.ErrLeaseLost, job.ErrInvalidState for the request's own fault;
//     job.ErrStorageFull and job.ErrUnavailable when the store cannot write.
//     Anything else is an internal error.
//   - Times come from the caller (the Now fields) so that tests can move the
//     clock; a store never reads the wall clock for job semantics.
//   - A job that dies by a rule (job.AfterFailure, job.AfterLeaseExpiry,
//     job.AfterMaxWait) in a queue with a dead-letter queue (see
//     job.QueueSettings.DeadLetterFor) stays dead where it is, and the
//     call that kills it inserts, in the same transaction, the copy
//     job.DeadLetter makes of it, under a new id, in the dead-letter
//     queue; the call reports the copy so that the engine can wake that
//     queue's fetches. A copy that dies makes none. A cancel or a delete
//     never makes a copy.
//   - Every attempt error a call records (a failure, an expired lease, a
//     maximum wait passed) goes into the job's history through
//     job.AppendError, so that the history stays within its bounds; a
//     store keeps it in the form EncodeErrors writes.
package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/session"
)

// Capabilities states what a store can do, so that the engine branches on
// abilities rather than on the backend's name.
type Capabilities struct {
	// MultiNode is true when several server processes may share the store.
	MultiNode bool
	// ListenNotify is true when the store reports, through
	// Hooks.OnAvailable, jobs made available by other nodes, and through
	// Hooks.OnConsumerGroupsDeleted the consumer groups they deleted.
	ListenNotify bool
}

// Hooks are callbacks a store may invoke. They must not block.
type Hooks struct {
	// OnAvailable is called with the queues in which another node made jobs
	// available. Stores without ListenNotify never call it; the engine
	// learns of its own node's changes from the return values.
	OnAvailable func(queues []string)
	// OnConsumerGroupsDeleted is called with the lanes (job.LaneName) of
	// consumer groups that another node deleted, and with nil when the
	// store may have missed such news (its listener reconnected): what
	// the caller keeps of which groups exist must then be read again.
	// Stores without ListenNotify never call it.
	OnConsumerGroupsDeleted func(lanes []string)
}

// CommitStats describes one commit of a store's writes, for metrics. A
// store takes a func(CommitStats) in its configuration at open, so that
// what watches its write path needs nothing of the store's package and
// the store nothing of the watcher's; the func is called on the write
// path and must not block.
type CommitStats struct {
	// Elapsed is how long the commit took, from the start of its
	// transaction until it was durable at the store's level.
	Elapsed time.Duration
	// Calls is how many store calls the commit carried: a store with
	// group commit carries many in one.
	Calls int
	// Jobs is how many jobs or items those calls carried (a call without
	// any counts one); zero when the store does not count them.
	Jobs int
}

// Inserter enqueues jobs.
type Inserter interface {
	// JobInsertMany inserts all jobs of p atomically (all or none) and
	// returns one result per job in the same order.
	//
	// A job whose ID already exists in the same queue is not inserted: its
	// result carries the existing job and Duplicate=true. A job whose ID
	// belongs to a job of another queue fails the whole insert with a
	// *job.IDTakenError naming "jobs[i].id" (job.DuplicateByID decides). A job with a UniqueKey is a duplicate
	// of the newest job in the same queue with the same key when that job
	// is pending (scheduled, available, active, retrying) and UniqueFor is
	// zero, or when that job was created after p.Now-UniqueFor and is not
	// cancelled. Duplicates within one batch resolve to the first of them.
	JobInsertMany(ctx context.Context, p *JobInsertManyParams) ([]InsertResult, error)
}

// Claimer hands out jobs and takes back their outcomes.
type Claimer interface {
	// JobClaim leases up to p.Max available jobs from p.Queues (skipping
	// paused queues) in order of priority (higher first), then RunAt, then
	// enqueue order, across all the listed queues that have no flow
	// control.
	//
	// A queue with flow control (limits, or jobs with a group) hands out
	// only what its limits let start at p.Now (see job.Limits): at most
	// MaxActive of its jobs active, at most Rate.Limit starts in any window
	// of Rate.Period, and for each group the same with GroupMaxActive and
	// GroupRate. Its jobs go out round-robin over the groups that have
	// available jobs, one job of each group a turn, a group's own jobs in
	// claim order; jobs without a group form one group. Such queues are
	// claimed after the others, one after the other in the order named.
	// The result says what held available jobs back (see ClaimResult).
	// Each claimed job comes
	// back active with Attempt+1, a LeaseToken higher than any token the job
	// had before (tokens only grow, across restarts and crashes too),
	// StartedAt=p.Now,
	// LeaseExpiresAt=p.Now+lease, where lease is p.LeaseDuration if set and
	// the job's own LeaseDuration otherwise, no Progress (a report
	// belongs to one attempt) and Worker=p.Worker, which the job keeps
	// after its lease ends, until its next claim. No job is handed to two
	// concurrent callers. An empty result is not an error.
	//
	// A job past its queue's maximum wait at p.Now (job.PastMaxWait) is
	// never handed out: a claim that meets it kills it where
	// job.AfterMaxWait sends it, with its dead-letter copy, and goes on to
	// the next job. Such a job takes no room under a queue's limits and
	// counts as no start; the result's Available names the dead-letter
	// queues that got copies.
	//
	// With p.Group set, the claim hands out only jobs whose group is
	// p.Group, from every queue named, and never a job without a group.
	// Every other rule holds as without it: claim order within the group,
	// the queues' pause, caps and rates, the group's cap and rate, and an
	// ordered queue's groups (a group whose holder is out, active or
	// waiting out a retry, hands out nothing; its holder goes out first
	// when it is available again). Such a claim takes no turn of a
	// queue's round-robin over its groups: the claims without a group go
	// on where they were. What held the group's jobs back is reported in
	// the result as for any claim.
	JobClaim(ctx context.Context, p *JobClaimParams) (*ClaimResult, error)

	// JobComplete acknowledges jobs. Each item is applied on its own: an
	// item whose ID is unknown gets job.ErrNotFound, one whose token is not
	// current or whose job is not active gets job.ErrLeaseLost, and neither
	// changes anything. An accepted item ends where job.AfterCompletion
	// sends it, completed (or cancelled if a cancel was requested while it
	// ran), stores its Result and clears the lease.
	JobComplete(ctx context.Context, p *JobCompleteParams) ([]job.Outcome, error)

	// JobFail records failed attempts, item by item with the same token
	// rules as JobComplete. The error is appended to the job's Errors. The
	// job ends where job.AfterFailure sends it: cancelled if a cancel was
	// requested (that takes precedence), else dead when NoRetry is set or
	// Attempt >= MaxAttempts, and retrying otherwise with RunAt = p.Now +
	// (RetryAfter if set, else Backoff.Delay(Attempt, p.Rand)). A job that
	// dies into a dead-letter queue names its copy in Outcome.DeadLetter.
	JobFail(ctx context.Context, p *JobFailParams) ([]job.Outcome, error)

	// JobExtend moves the lease expiry of active jobs to p.Now+Lease (the
	// job's LeaseDuration when Lease is zero), item by item with the same
	// token rules. Outcome.CancelRequested tells the worker to stop.
	JobExtend(ctx context.Context, p *JobExtendParams) ([]job.Outcome, error)

	// JobProgress stores a progress report for an active job, with the same
	// token rules.
	JobProgress(ctx context.Context, p *JobProgressParams) error

	// JobRelease hands active jobs back unrun, item by item with the same
	// token rules: as job.AfterRelease decides, each becomes available at
	// once with Attempt-1 (the hand-out does not count) and no error
	// recorded, or cancelled if a cancel was requested. The lease is cleared; the token keeps its value
	// so the next hand-out still gets a higher one; RunAt is unchanged, so
	// the job keeps its place in claim order.
	JobRelease(ctx context.Context, p *JobReleaseParams) ([]job.Outcome, error)
}

// Transactor applies the outcomes of leased jobs together with the jobs
// they lead to, in one call.
type Transactor interface {
	// JobTransact acknowledges the jobs of p.Complete, fails those of
	// p.Fail and inserts the jobs of p.Insert in one atomic operation: all
	// of it or nothing.
	//
	// Every ack and fail item is checked before anything changes, in
	// order (p.Complete, then p.Fail). The first item refused fails the
	// whole call with a *job.ItemError naming it: one whose ID is unknown
	// wraps job.ErrNotFound and names "ack[i].id" (or "fail[i].id"); one
	// whose token is not current, whose job is not active, or whose ID an
	// earlier item of the call names already, wraps job.ErrLeaseLost and
	// names "ack[i].token" (or "fail[i].token"). The call then changes
	// nothing.
	//
	// Then each acknowledged job ends as JobComplete ends it and each
	// failed one as JobFail does (p.Rand giving the jitter), and the jobs
	// of p.Insert go in by the rules of JobInsertMany, after the acks and
	// fails, whose effects they see (a unique key whose pending job was
	// acknowledged here is free again). A duplicate comes back with
	// Duplicate=true; an ID that belongs to a job of another queue fails
	// the whole call with a *job.IDTakenError naming "enqueue[i].id",
	// other refusals of an insert name their field likewise
	// ("enqueue[i].durability"), and the call changes nothing. A commit
	// waits for the disk unless every job the call acknowledges, fails
	// or inserts is of process durability.
	JobTransact(ctx context.Context, p *JobTransactParams) (*TransactResult, error)
}

// Admin inspects and manages jobs and queues.
type Admin interface {
	// JobGet returns one job or job.ErrNotFound.
	JobGet(ctx context.Context, id string) (*job.Job, error)
	// JobList returns jobs in enqueue order, filtered by queue and state,
	// and the active ones by worker, one page at a time.
	JobList(ctx context.Context, p *job.ListParams) (*job.ListPage, error)
	// JobCountActiveByWorker counts, for each name of p.Workers, the
	// active jobs whose Worker is that name, and returns the names with
	// at least one. It reads the store's active jobs by worker (an index,
	// or the leases in memory), never every job, so that it costs what
	// the named workers hold.
	JobCountActiveByWorker(ctx context.Context, p *JobCountActiveByWorkerParams) (map[string]int, error)
	// JobCancel cancels a job: a scheduled, available or retrying job ends
	// cancelled at once; an active job gets CancelRequested and keeps its
	// lease until its worker acks, fails or loses it. Cancelling a cancelled
	// job is a no-op; a completed or dead job gives job.ErrInvalidState.
	// It returns the job as it is after the call.
	JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error)
	// JobRetry makes a dead, cancelled, retrying or scheduled job (the
	// states job.State.Retryable lets through) available now (RunAt =
	// now), with its attempt count reset to zero, FinishedAt and
	// CancelRequested cleared and its errors kept. Other states give
	// job.ErrInvalidState. It returns the updated job.
	JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error)
	// JobDelete removes a job that is not active (job.ErrInvalidState: an
	// active job must be cancelled first).
	JobDelete(ctx context.Context, id string) error
	// JobRetryMany applies JobRetry to every job of one queue in one state
	// (dead, cancelled, retrying or scheduled: job.State.Retryable) and
	// returns how many it moved; another state gives job.ErrInvalidState.
	JobRetryMany(ctx context.Context, p *JobBulkParams) (int, error)
	// JobDeleteMany deletes every job of one queue in one state (any state
	// but active) and returns how many it removed.
	JobDeleteMany(ctx context.Context, p *JobBulkParams) (int, error)

	// QueueList returns every known queue (one that ever had a job or was
	// paused), sorted by name.
	QueueList(ctx context.Context) ([]job.QueueInfo, error)
	// QueueGet returns one queue or job.ErrNotFound.
	QueueGet(ctx context.Context, name string) (*job.QueueInfo, error)
	// QueueDefaults returns what queue name gives the jobs enqueued into
	// it without their own (its durability, full unless set, and its
	// settings), or job.ErrNotFound for an unknown queue. Every enqueue
	// reads it, so it reads no counts.
	QueueDefaults(ctx context.Context, name string) (QueueDefaults, error)
	// QueueSetPaused pauses or resumes a queue (creating it if unknown).
	// Paused queues keep accepting jobs but JobClaim skips them.
	QueueSetPaused(ctx context.Context, name string, paused bool) error
	// QueuePurge deletes a queue's available jobs and returns how many.
	QueuePurge(ctx context.Context, name string) (int, error)
	// QueueSetLimits sets a queue's flow control (creating the queue if
	// unknown); zero limits remove it. The engine has checked and
	// normalized them (see job.Limits.Check and Normalized). An ordered
	// queue (Limits.Ordered) hands out each group's jobs one at a time, a
	// job that job.HoldsGroup says holds its group first whenever it is
	// available, and no other job of the group while it is not.
	QueueSetLimits(ctx context.Context, name string, l job.Limits) error
	// QueueSetDurability sets the durability of the jobs later enqueued
	// into a queue without one of their own (creating the queue if
	// unknown). Jobs already in the queue keep theirs.
	QueueSetDurability(ctx context.Context, name string, d job.Durability) error
	// QueueSetSettings replaces a queue's settings as a whole (creating
	// the queue if unknown); zero settings clear them. The engine has
	// checked them (see job.QueueSettings.Check). They apply from the
	// call on to every job of the queue: a new maximum wait holds for the
	// jobs already waiting, from their run times.
	QueueSetSettings(ctx context.Context, name string, s job.QueueSettings) error
	// QueuePatchSettings changes some of a queue's settings (creating the
	// queue if unknown) in one transaction: it reads the queue's
	// settings, merges p into them with job.SettingsPatch.Merge and
	// writes the result as QueueSetSettings would, so that concurrent
	// patches of different fields, from any node, all survive. It returns
	// the settings written. A patch that Merge refuses returns Merge's
	// *job.InputError and changes nothing, not even creating the queue.
	QueuePatchSettings(ctx context.Context, name string, p job.SettingsPatch) (job.QueueSettings, error)
	// QueuePatchLimits changes some of a queue's limits, its lanes' with
	// them, as QueuePatchSettings changes settings: read, merge with
	// job.LimitsPatch.Merge, write as QueueSetLimits would, in one
	// transaction. It returns the limits written.
	QueuePatchLimits(ctx context.Context, name string, p job.LimitsPatch) (job.Limits, error)
}

// Maintainer is what the background services need.
type Maintainer interface {
	// JobPromoteDue makes up to limit scheduled and retrying jobs whose
	// RunAt <= now available.
	JobPromoteDue(ctx context.Context, now time.Time, limit int) (*MaintenanceResult, error)
	// JobRescueExpired takes back up to limit active jobs whose lease ran
	// out (LeaseExpiresAt <= now): each gets an error
	// job.LeaseExpiredMessage ("lease expired") for its attempt and ends
	// where job.AfterLeaseExpiry sends it: cancelled (cancel requested),
	// dead (no attempts left) or available at once. The result's
	// Available includes the dead-letter queues that got copies.
	JobRescueExpired(ctx context.Context, now time.Time, limit int) (*MaintenanceResult, error)
	// JobPrune deletes up to p.Limit final jobs by retention, running the
	// passes of p.Passes in order: completed and cancelled jobs past their
	// age, dead jobs past theirs, then the oldest beyond each count cap.
	JobPrune(ctx context.Context, p *JobPruneParams) (int, error)
	// JobExpireWaiting kills up to limit available jobs past their queues'
	// maximum waits at now (job.PastMaxWait), that no claim met: each
	// ends where job.AfterMaxWait sends it, dead with
	// job.MaxWaitMessage, and leaves its dead-letter copy. Count is how
	// many it killed, Available the dead-letter queues that got copies,
	// Next when the next job may pass its wait (zero when the store does
	// not know).
	JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*MaintenanceResult, error)
}

// Store is the whole storage contract.
type Store interface {
	Inserter
	Claimer
	Transactor
	Admin
	Maintainer
	Scheduler
	ConsumerGroups
	session.Store
	// Capabilities states what this store can do.
	Capabilities() Capabilities
	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
	// Close finishes in-flight commits and releases the store. Calls after
	// Close return job.ErrUnavailable. Close is idempotent.
	Close() error
}

// JobInsertParams is one job to insert. The engine has validated it and set
// its defaults; the store stores it as given: Payload byte for byte, times
// to at least millisecond precision. A State other than scheduled or
// available is refused with an error, failing the whole insert.
type JobInsertParams struct {
	ID            string
	Queue         string
	Kind          string
	Payload       json.RawMessage
	Priority      int
	State         job.State // scheduled or available
	RunAt         time.Time
	MaxAttempts   int
	Backoff       job.Backoff
	LeaseDuration time.Duration
	UniqueKey     string
	UniqueFor     time.Duration
	Tags          []string
	// Group is the job's group; empty for none.
	Group string
	// Durability is full or process; a store that keeps jobs in memory only
	// takes memory. Empty means full.
	Durability job.Durability
	// TraceParent is the job's W3C traceparent (job.ValidTraceParent),
	// kept as given; empty for none.
	TraceParent string
	// CreatedAt, when set, is the job's creation time in place of the
	// insert's Now: a consumer group's copy keeps its job's.
	CreatedAt time.Time
	// FreshID says the engine made ID just now (job.NewID: a millisecond
	// time and 80 random bits), so that no other job has it: a store may
	// skip looking for it among its jobs, finished ones included. The
	// contract is the same either way.
	FreshID bool
}

// JobInsertManyParams is one atomic insert of several jobs.
type JobInsertManyParams struct {
	Jobs []JobInsertParams
	// Create are queues to create in the same atomic operation, before
	// the jobs go in (see QueueConfig). An insert of no jobs may still
	// create queues. A refused insert creates none.
	Create []QueueConfig
	Now    time.Time
}

// QueueConfig is a queue that a call creates, with its configuration,
// together with the jobs it inserts (JobInsertManyParams.Create,
// JobTransactParams.Create): a queue the store does not know (QueueGet
// would not find it) is created with Limits and Settings, as
// QueueSetLimits and QueueSetSettings would set them, in the call's
// transaction; a queue the store knows is left as it is, its
// configuration its own. The engine has checked the configuration (see
// job.Limits.Check and job.QueueSettings.Check) and normalized the
// limits. The call's commit waits for the disk, whatever its jobs'
// durability.
type QueueConfig struct {
	Name     string
	Limits   job.Limits
	Settings job.QueueSettings
}

// InsertResult is the outcome of one inserted job.
type InsertResult struct {
	// Job is the inserted job, or the existing one for a duplicate. For a
	// duplicate, Job is complete; for an insert, Payload may be the caller's
	// own slice.
	Job *job.Job
	// Duplicate is true when nothing was inserted because Job already
	// existed (same ID or same unique key).
	Duplicate bool
}

// JobClaimParams asks for jobs to lease.
type JobClaimParams struct {
	Queues []string
	Max    int
	// LeaseDuration overrides each job's own when non-zero.
	LeaseDuration time.Duration
	// Group, when set, limits the claim to the jobs of that flow-control
	// group (one group of an ordered queue); jobs without a group are
	// never handed out then. Empty: every job. See Claimer.JobClaim.
	Group string
	// Runs lets a free group of an ordered queue give several of its jobs
	// in claim order, a run (claim.Request.Runs), instead of one.
	Runs bool
	// MaxGroups, when positive, bounds how many groups of each queue
	// give the claim jobs.
	MaxGroups int
	// Worker is the name the fetch gave its worker (job.WorkerName: valid
	// UTF-8 without NUL), which each claimed job keeps as its Worker
	// until its next claim; empty for none, which clears it.
	Worker string
	Now    time.Time
}

// ClaimResult is what a claim handed out, and what held other available
// jobs back, so that a fetch that got fewer than it asked for knows when
// to look again.
type ClaimResult struct {
	Jobs []*job.Job
	// RetryAt is, when a rate held available jobs back, the first moment
	// one of those rates lets a job start; zero otherwise.
	RetryAt time.Time
	// Capped lists the queues in which an active cap (MaxActive or
	// GroupMaxActive) held available jobs back: a job of theirs that
	// stops being active frees a place.
	Capped []string
	// Available lists the dead-letter queues that got copies of jobs the
	// claim killed for their wait.
	Available []string
}

// ClaimedJobs is the jobs of a claim's result, for callers that need
// nothing else: ClaimedJobs(st.JobClaim(ctx, p)).
func ClaimedJobs(r *ClaimResult, err error) ([]*job.Job, error) {
	if err != nil || r == nil {
		return nil, err
	}
	return r.Jobs, nil
}

// JobCompleteParams acknowledges several jobs.
type JobCompleteParams struct {
	Items []job.CompleteItem
	Now   time.Time
}

// JobFailParams fails several attempts.
type JobFailParams struct {
	Items []job.FailItem
	Now   time.Time
	// Rand returns a uniform value in [0,1) for backoff jitter; nil means
	// no jitter.
	Rand func() float64
}

// JobExtendParams extends several leases.
type JobExtendParams struct {
	Items []job.ExtendItem
	Now   time.Time
}

// JobReleaseParams hands several jobs back.
type JobReleaseParams struct {
	Items []job.ReleaseItem
	Now   time.Time
}

// JobProgressParams stores one progress report.
type JobProgressParams struct {
	ID       string
	Token    int64
	Progress json.RawMessage
	Now      time.Time
}

// JobTransactParams is one transaction: acks, failed attempts and new
// jobs, applied together (see Transactor).
type JobTransactParams struct {
	// Complete are the jobs to acknowledge, as JobComplete takes them.
	Complete []job.CompleteItem
	// Fail are the failed attempts, as JobFail takes them.
	Fail []job.FailItem
	// Insert are the jobs to insert, as JobInsertMany takes them.
	Insert []JobInsertParams
	// Create are the queues to create with their configuration, as
	// JobInsertManyParams.Create; a refused transaction creates none.
	Create []QueueConfig
	Now    time.Time
	// Rand returns a uniform value in [0,1) for backoff jitter; nil means
	// no jitter.
	Rand func() float64
}

// TransactResult is what a transaction did, item by item in the order of
// its params. Every item was accepted: a refused item fails the call.
type TransactResult struct {
	// Completed are the outcomes of the acks: each job's queue and the
	// state it ended in.
	Completed []job.Outcome
	// Failed are the outcomes of the failed attempts: each job's queue,
	// the state it went to and, for a retrying job, when it runs again.
	Failed []job.Outcome
	// Inserted are the results of the inserts, as JobInsertMany gives
	// them.
	Inserted []InsertResult
}

// MaxWorkerCount bounds the names of one JobCountActiveByWorker: the
// engine's registry of workers holds no more (see queue.MaxWorkers).
const MaxWorkerCount = 10_000

// JobCountActiveByWorkerParams names the workers whose active jobs to
// count.
type JobCountActiveByWorkerParams struct {
	// Workers are the names (job.WorkerName), each once, at most
	// MaxWorkerCount of them.
	Workers []string
}

// JobBulkParams selects jobs for a bulk operation.
type JobBulkParams struct {
	Queue string
	State job.State
	Now   time.Time
}

// QueueDefaults is what a queue gives the jobs enqueued into it without
// their own.
type QueueDefaults struct {
	// Durability is the level of jobs enqueued without one: full unless
	// set with QueueSetDurability.
	Durability job.Durability
	// Settings holds the queue's job defaults (job.QueueSettings'
	// DefaultLease, DefaultMaxAttempts and DefaultDelay) among the rest.
	Settings job.QueueSettings
}

// MaintenanceResult reports what a promotion or rescue pass did.
type MaintenanceResult struct {
	// Count is how many jobs changed state.
	Count int
	// Available lists the queues in which jobs became available, the
	// dead-letter queues that got copies of jobs that died included.
	Available []string
	// Next is when the next job of this kind is due (the earliest RunAt of
	// the remaining scheduled/retrying jobs, or the earliest lease expiry
	// of active jobs); zero when there is none.
	Next time.Time
	// Rescued counts, for a rescue pass (JobRescueExpired), the jobs
	// whose lease expired by queue; nil for other passes and when none
	// was rescued.
	Rescued map[string]int
}

// JobPruneParams is the retention policy applied by one prune pass.
type JobPruneParams struct {
	// CompletedBefore deletes completed and cancelled jobs finished before
	// it; zero disables age pruning for them.
	CompletedBefore time.Time
	// DeadBefore deletes dead jobs finished before it; zero disables.
	DeadBefore time.Time
	// KeepCompleted keeps at most this many completed and cancelled jobs
	// (the newest); zero means no count limit.
	KeepCompleted int
	// KeepDead keeps at most this many dead jobs (the newest); zero means
	// no count limit.
	KeepDead int
	// Limit bounds how many jobs one pass deletes.
	Limit int
	// Now is the time of the pass: a store may also drop the flow-control
	// state that no longer counts at it (start logs older than their
	// rate's period). Zero drops none.
	Now time.Time
}

// Passes is the retention sweep p asks for, in the order a store runs it
// against p.Limit (job.PrunePasses decides the passes and their order).
func (p *JobPruneParams) Passes() []job.PrunePass {
	return job.PrunePasses(p.CompletedBefore, p.DeadBefore, p.KeepCompleted, p.KeepDead)
}
