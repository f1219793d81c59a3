package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	// insertColumns are the columns an insert sets, in the order of
	// packInsertRow's arguments. The columns after wait_until are those
	// of the fields spec holds, which rows since schema version 3 leave
	// at zero.
	insertColumns = `seq, id, queue, payload, priority, state, run_at, unique_key, spec, grp, wait_until,
	kind, max_attempts, backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, created_at`
	insertPlaceholders = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0, '', 0, 0, 0, 0, 0)`
	sqlNewestUnique    = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND unique_key = ? ORDER BY seq DESC LIMIT 1`
	sqlSeqsOfIDs       = `SELECT id, seq FROM jobs WHERE id IN (SELECT value FROM json_each(?))`
)

var (
	stJobByID      = prepared(sqlJobByID)
	stNewestUnique = prepared(sqlNewestUnique)
	// stInsertRows[k] inserts 1<<k jobs.
	stInsertRows = func() (ids [insertChunkShift + 1]rawID) {
		for k := range ids {
			ids[k] = preparedRaw(sqlInsertRows(1 << k))
		}
		return ids
	}()
)

// insertChunk is how many rows one multi-row INSERT carries at most:
// statements with many rows spend less per row on statement overhead, and
// 32 rows of 11 values stay well below SQLite's limit of 32766 parameters.
const insertChunk = 1 << insertChunkShift

// insertChunkShift is the base-2 logarithm of insertChunk.
const insertChunkShift = 5

// sqlInsertRows inserts n rows.
func sqlInsertRows(n int) string {
	return `INSERT INTO jobs (` + insertColumns + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat(insertPlaceholders+",", n), ",") + ` ON CONFLICT (id) DO NOTHING`
}

// JobInsertMany inserts p.Jobs atomically, after creating the queues of
// p.Create in the same operation; see store.Inserter. Jobs without a
// unique key go in with multi-row statements; a job with one is checked
// against the jobs before it, so it goes in alone, in order. Duplicates
// within a batch resolve to the first.
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	out := make([]store.InsertResult, len(p.Jobs))
	relaxed := func(*writer) bool { return len(p.Create) == 0 && insertsRelaxed(p.Jobs) }
	err := s.doRelaxed(ctx, max(len(p.Jobs), 1), relaxed, func(w *writer) error {
		if err := w.checkInserts(p.Jobs); err != nil {
			return err
		}
		if err := w.createQueues(p.Create); err != nil {
			return err
		}
		return w.insertJobs(p.Jobs, p.Now, out)
	})
	if err != nil {
		return nil, wrap("insert jobs", err)
	}
	return out, nil
}

// insertsRelaxed reports whether none of jobs needs its commit fsynced:
// all are of process or memory durability (see committer.do).
func insertsRelaxed(jobs []store.JobInsertParams) bool {
	for i := range jobs {
		if d := jobs[i].Durability; d != job.DurabilityProcess && d != job.DurabilityMemory {
			return false
		}
	}
	return true
}

// checkInserts refuses, before anything is written, jobs this store
// cannot insert: in a state other than scheduled or available, or of a
// durability it does not keep.
func (w *writer) checkInserts(jobs []store.JobInsertParams) error {
	for i := range jobs {
		jp := &jobs[i]
		if jp.State != job.StateAvailable && jp.State != job.StateScheduled {
			return fmt.Errorf("jobs[%d]: insert job %s in state %q: only scheduled or available", i, jp.ID, jp.State)
		}
		if !w.keeps(jp.Durability) {
			return fmt.Errorf("jobs[%d]: insert job %s: %w", i, jp.ID,
				job.Invalid(fmt.Sprintf("jobs[%d].durability", i), "this store does not keep %q jobs", jp.Durability))
		}
	}
	return nil
}

// insertJobs inserts jobs in the writer's transaction, filling out with
// one result per job; see JobInsertMany.
func (w *writer) insertJobs(jobs []store.JobInsertParams, now time.Time, out []store.InsertResult) error {
	if err := w.checkInserts(jobs); err != nil {
		return err
	}
	for i := range jobs {
		if jobs[i].Group != "" {
			if err := w.markGrouped(jobs[i].Queue); err != nil {
				return err
			}
		}
	}
	ins := inserter{w: w, now: now.UTC(), out: out}
	for i := range jobs {
		jp := &jobs[i]
		if jp.UniqueKey == "" {
			ins.pending = append(ins.pending, i)
			if len(ins.pending) == insertChunk {
				if err := ins.flush(jobs); err != nil {
					return err
				}
			}
			continue
		}
		if err := ins.flush(jobs); err != nil {
			return err
		}
		dup, err := w.duplicate(jp, ins.now, i)
		if err != nil {
			return fmt.Errorf("jobs[%d]: %w", i, err)
		}
		if dup != nil {
			out[i] = store.InsertResult{Job: dup, Duplicate: true}
			continue
		}
		ins.pending = append(ins.pending, i)
		if err := ins.flush(jobs); err != nil {
			return err
		}
	}
	if err := ins.flush(jobs); err != nil {
		return err
	}
	return w.copyToLanes(jobs, now, out)
}

// inserter gathers the rows of one JobInsertMany and writes them in
// chunks, with seqs it assigns itself (so a chunk needs no read back).
type inserter struct {
	w       *writer
	now     time.Time
	out     []store.InsertResult
	pending []int // indexes into the jobs of the call
}

// flush inserts the pending jobs with as few statements as the prepared
// sizes allow: each inserts the largest power of two of rows, up to
// insertChunk, that is left, so 29 rows go in as 16, 8, 4 and 1.
func (ins *inserter) flush(jobs []store.JobInsertParams) error {
	all := ins.pending
	err := inSizedRuns(all, insertChunkShift, func(run []int, shift int) error {
		ins.pending = run
		return ins.insertRows(jobs, ins.w.st.getRaw(stInsertRows[shift]))
	})
	ins.pending = all[:0]
	return err
}

// insertRows inserts the pending jobs with stmt, which inserts as many
// rows as there are pending jobs.
func (ins *inserter) insertRows(jobs []store.JobInsertParams, stmt *rawStmt) error {
	w := ins.w
	first := w.nextSeq
	args := stmt.args()
	for k, i := range ins.pending {
		w.packInsertRow(args, first+int64(k), &jobs[i], ins.createdAt(&jobs[i]))
	}
	w.nextSeq += int64(len(ins.pending))
	n, err := stmt.execArgs()
	if err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	var dups map[string]int64 // id → seq in the database, when not ours
	if int(n) != len(ins.pending) {
		if dups, err = ins.existing(jobs); err != nil {
			return err
		}
	}
	for k, i := range ins.pending {
		jp := &jobs[i]
		seq := first + int64(k)
		if dbSeq, ok := dups[jp.ID]; ok && dbSeq != seq {
			existing, _, err := w.load(jp.ID)
			if err != nil {
				return fmt.Errorf("jobs[%d]: read duplicate job %s: %w", i, jp.ID, err)
			}
			if err := job.DuplicateByID(existing, jp.Queue, fmt.Sprintf("jobs[%d].id", i)); err != nil {
				// Not a refusal before writing: rows of this call may be
				// written, so the writer rolls the call back.
				return err
			}
			ins.out[i] = store.InsertResult{Job: existing, Duplicate: true}
			continue
		}
		if _, err := w.ensureQueue(jp.Queue); err != nil {
			return err
		}
		j := &job.Job{
			ID: jp.ID, Queue: jp.Queue, Kind: jp.Kind, Payload: jp.Payload, Priority: jp.Priority, State: jp.State,
			RunAt: jp.RunAt.UTC(), MaxAttempts: jp.MaxAttempts, Backoff: jp.Backoff, LeaseDuration: jp.LeaseDuration,
			UniqueKey: jp.UniqueKey, UniqueFor: jp.UniqueFor, Tags: jp.Tags, Group: jp.Group, CreatedAt: ins.createdAt(jp),
			Durability: w.durabilityOf(jp.Durability), TraceParent: jp.TraceParent,
		}
		w.added(j, seq)
		ins.out[i] = store.InsertResult{Job: j}
	}
	return nil
}

// existing reads the seqs of the pending jobs' ids after an insert that
// skipped some rows: an id whose seq is not the one given to its row
// belongs to an earlier job (of the database, or earlier in the chunk).
func (ins *inserter) existing(jobs []store.JobInsertParams) (map[string]int64, error) {
	ids := make([]string, len(ins.pending))
	for k, i := range ins.pending {
		ids[k] = jobs[i].ID
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("look up duplicate ids: %w", err)
	}
	type row struct {
		id  string
		seq int64
	}
	rows, err := ins.w.conn.QueryContext(context.Background(), sqlSeqsOfIDs, string(list))
	found, err := scanAll(rows, err, func(r *sql.Rows, v *row) error { return r.Scan(&v.id, &v.seq) })
	if err != nil {
		return nil, fmt.Errorf("look up duplicate ids: %w", err)
	}
	out := make(map[string]int64, len(found))
	for _, v := range found {
		out[v.id] = v.seq
	}
	return out, nil
}

// durabilityOf is the stored form of d: empty is the store's own level,
// full on disk and memory in memory.
func (w *writer) durabilityOf(d job.Durability) job.Durability {
	switch {
	case d != "":
		return d
	case w.cfg.Memory:
		return job.DurabilityMemory
	}
	return job.DurabilityFull
}

// keeps reports whether this store may hold jobs of durability d: an
// on-disk store takes full and process, an in-memory one memory.
func (w *writer) keeps(d job.Durability) bool {
	if w.cfg.Memory {
		return d == "" || d == job.DurabilityMemory
	}
	return d == "" || d == job.DurabilityFull || d == job.DurabilityProcess
}

// packInsertRow packs the arguments of jp's row, in insertColumns order,
// with seq and its creation time now.
func (w *writer) packInsertRow(args *packedArgs, seq int64, jp *store.JobInsertParams, now time.Time) {
	args.addInt(seq)
	args.addText(jp.ID)
	args.addText(jp.Queue)
	args.addBlobOrNull(jp.Payload)
	args.addInt(int64(jp.Priority))
	args.addText(string(jp.State))
	args.addInt(jp.RunAt.UTC().UnixNano())
	args.addTextOrNull(jp.UniqueKey)
	args.addBlobOf(func(b []byte) []byte {
		return appendSpec(b, &spec{
			kind: jp.Kind, maxAttempts: jp.MaxAttempts, backoff: jp.Backoff, leaseFor: jp.LeaseDuration,
			uniqueFor: jp.UniqueFor, createdAt: now.UnixNano(), durability: w.durabilityOf(jp.Durability), tags: jp.Tags,
			traceParent: jp.TraceParent,
		})
	})
	q := w.queues[jp.Queue]
	if group, set := q.rowGroup(jp.Group); set {
		args.addText(group)
	} else {
		args.addNull()
	}
	// The moment from which the job may no longer start, in a queue with
	// a maximum wait (see expire.go).
	if q != nil && q.settings.MaxWait > 0 {
		args.addInt(jp.RunAt.UTC().Add(q.settings.MaxWait).UnixNano())
	} else {
		args.addNull()
	}
}

// createdAt is when jp was created: now, unless it says.
func (ins *inserter) createdAt(jp *store.JobInsertParams) time.Time {
	if jp.CreatedAt.IsZero() {
		return ins.now
	}
	return jp.CreatedAt.UTC()
}

// duplicate returns the existing job that jp, the i-th job of its call,
// duplicates by ID or by unique key, or nil; or a *job.IDTakenError when
// its id belongs to a job of another queue.
func (w *writer) duplicate(jp *store.JobInsertParams, now time.Time, i int) (*job.Job, error) {
	existing, _, err := w.load(jp.ID)
	if err == nil {
		if err := job.DuplicateByID(existing, jp.Queue, fmt.Sprintf("jobs[%d].id", i)); err != nil {
			return nil, err
		}
		return existing, nil
	}
	if !errors.Is(err, job.ErrNotFound) {
		return nil, fmt.Errorf("look up job %s: %w", jp.ID, err)
	}
	newest, _, err := scanJob(w.st.get(stNewestUnique).QueryRow(jp.Queue, jp.UniqueKey))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up unique key: %w", err)
	}
	if l := w.leases.get(newest.ID); l != nil {
		l.overlay(newest)
	}
	if job.UniqueConflict(newest, jp.UniqueFor, now) {
		return newest, nil
	}
	return nil, nil
}

// load reads one job and its seq in the writer's transaction, as it
// stands with its lease, or job.ErrNotFound.
func (w *writer) load(id string) (*job.Job, int64, error) {
	j, seq, err := scanJob(w.st.get(stJobByID).QueryRow(id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, job.ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	if l := w.leases.get(id); l != nil {
		l.overlay(j)
	}
	return j, seq, nil
}

// copyToLanes inserts, for every job of jobs that out says was inserted,
// a copy in each consumer group of its queue.
func (w *writer) copyToLanes(jobs []store.JobInsertParams, now time.Time, out []store.InsertResult) error {
	var copies []store.JobInsertParams
	for i := range jobs {
		groups := w.lanes[jobs[i].Queue]
		if len(groups) == 0 || out[i].Duplicate {
			continue
		}
		for _, g := range groups {
			copies = append(copies, store.CopyOfInsert(&jobs[i], g.name, now))
		}
	}
	if len(copies) == 0 {
		return nil
	}
	if err := w.insertJobs(copies, now, make([]store.InsertResult, len(copies))); err != nil {
		return fmt.Errorf("copy jobs to their consumer groups: %w", err)
	}
	return nil
}
