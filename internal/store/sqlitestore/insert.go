package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	relaxed := func(*writer) bool { return len(p.Create) == 0 && store.Relaxed(p.Jobs) }
	err := s.doRelaxed(ctx, max(len(p.Jobs), 1), relaxed, func(w *writer) error {
		if err := w.checkInserts(p.Jobs); err != nil {
			return err
		}
		if err := w.createQueues(p.Create); err != nil {
			return err
		}
		return w.insertCheckedJobs(p.Jobs, p.Now, out)
	})
	if err != nil {
		return nil, wrap("insert jobs", err)
	}
	return out, nil
}

// checkInserts refuses, before anything is written, jobs this store
// cannot insert (store.CheckInserts).
func (w *writer) checkInserts(jobs []store.JobInsertParams) error {
	return store.CheckInserts(jobs, w.durabilityOf(""))
}

// insertJobs inserts jobs in the writer's transaction, filling out with
// one result per job; see JobInsertMany. A batch without unique keys goes
// in as it is, an id that exists skipped by the insert (insertRows); one
// with unique keys is planned first (store.PlanInserts).
func (w *writer) insertJobs(jobs []store.JobInsertParams, now time.Time, out []store.InsertResult) error {
	if err := w.checkInserts(jobs); err != nil {
		return err
	}
	return w.insertCheckedJobs(jobs, now, out)
}

// insertCheckedJobs is insertJobs for jobs that checkInserts let through.
func (w *writer) insertCheckedJobs(jobs []store.JobInsertParams, now time.Time, out []store.InsertResult) error {
	for i := range jobs {
		if jobs[i].Group != "" {
			if err := w.markGrouped(jobs[i].Queue); err != nil {
				return err
			}
		}
	}
	now = now.UTC()
	if !slices.ContainsFunc(jobs, func(jp store.JobInsertParams) bool { return jp.UniqueKey != "" }) {
		all := make([]int, len(jobs))
		for i := range all {
			all[i] = i
		}
		if err := w.insertRows(jobs, all, now, out); err != nil {
			return err
		}
		return w.copyToLanes(jobs, now, out)
	}
	byID, newest, err := w.lookUpDuplicates(jobs)
	if err != nil {
		return err
	}
	plan, err := store.PlanInserts(jobs, byID, newest, now, out)
	if err != nil {
		return err
	}
	if err := w.insertRows(jobs, plan.Insert, now, out); err != nil {
		return err
	}
	if err := plan.SettleDuplicates(jobs, out); err != nil {
		return err
	}
	return w.copyToLanes(jobs, now, out)
}

// insertRows inserts the jobs at idx, created at now unless they say,
// with seqs it assigns itself (so that no row needs a read back), and
// fills their results. It takes as few statements as the prepared sizes
// allow: each inserts the largest power of two of rows, up to
// insertChunk, that is left, so 29 rows go in as 16, 8, 4 and 1.
func (w *writer) insertRows(jobs []store.JobInsertParams, idx []int, now time.Time, out []store.InsertResult) error {
	return inSizedRuns(idx, insertChunkShift, func(run []int, shift int) error {
		return w.insertRun(jobs, run, now, out, w.st.getRaw(stInsertRows[shift]))
	})
}

// insertRun inserts the jobs at run with stmt, which inserts as many rows
// as run has; see insertRows.
func (w *writer) insertRun(jobs []store.JobInsertParams, run []int, now time.Time, out []store.InsertResult, stmt *rawStmt) error {
	first := w.nextSeq
	args := stmt.args()
	for k, i := range run {
		w.packInsertRow(args, first+int64(k), &jobs[i], jobs[i].Created(now))
	}
	w.nextSeq += int64(len(run))
	n, err := stmt.execArgs()
	if err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	var dups map[string]int64 // id → seq in the database, when not ours
	if int(n) != len(run) {
		if dups, err = w.existing(jobs, run); err != nil {
			return err
		}
	}
	for k, i := range run {
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
			out[i] = store.InsertResult{Job: existing, Duplicate: true}
			continue
		}
		if _, err := w.ensureQueue(jp.Queue); err != nil {
			return err
		}
		j := store.NewJob(jp, jp.RunAt.UTC(), jp.Created(now), w.durabilityOf(jp.Durability))
		w.added(j, seq)
		out[i] = store.InsertResult{Job: j}
	}
	return nil
}

// existing reads the seqs of the ids of the jobs at run after an insert that
// skipped some rows: an id whose seq is not the one given to its row
// belongs to an earlier job (of the database, or earlier in the chunk).
func (w *writer) existing(jobs []store.JobInsertParams, run []int) (map[string]int64, error) {
	ids := make([]string, len(run))
	for k, i := range run {
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
	rows, err := w.conn.QueryContext(context.Background(), sqlSeqsOfIDs, string(list))
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

// durabilityOf is the stored form of d (job.StoredDurability): empty is
// the store's own level, full on disk and memory in memory.
func (w *writer) durabilityOf(d job.Durability) job.Durability {
	own := job.DurabilityFull
	if w.cfg.Memory {
		own = job.DurabilityMemory
	}
	d, _ = job.StoredDurability(d, own)
	return d
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

// lookUpDuplicates reads what jobs may duplicate, as they stand with
// their leases: the jobs of their ids and the newest job of each of their
// queues' unique keys.
func (w *writer) lookUpDuplicates(jobs []store.JobInsertParams) (map[string]*job.Job, map[store.UniqueRef]*job.Job, error) {
	ids := make([]string, len(jobs))
	for i := range jobs {
		ids[i] = jobs[i].ID
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, nil, fmt.Errorf("look up job ids: %w", err)
	}
	found, _, err := scanJobs(w.conn.QueryContext(context.Background(), sqlJobsByIDs, string(list)))
	if err != nil {
		return nil, nil, fmt.Errorf("look up job ids: %w", err)
	}
	byID := make(map[string]*job.Job, len(found))
	for _, j := range found {
		byID[j.ID] = w.withLease(j)
	}
	newest := make(map[store.UniqueRef]*job.Job)
	for i := range jobs {
		r := store.UniqueRef{Queue: jobs[i].Queue, Key: jobs[i].UniqueKey}
		if _, seen := newest[r]; seen || r.Key == "" {
			continue
		}
		j, _, err := scanJob(w.st.get(stNewestUnique).QueryRow(r.Queue, r.Key))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, nil, fmt.Errorf("look up unique key: %w", err)
		}
		newest[r] = w.withLease(j)
	}
	return byID, newest, nil
}

// withLease is j, nil or as read, as it stands with its lease.
func (w *writer) withLease(j *job.Job) *job.Job {
	if j != nil {
		if l := w.leases.get(j.ID); l != nil {
			l.overlay(j)
		}
	}
	return j
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
	return w.withLease(j), seq, nil
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
			copies = append(copies, store.CopyOfInsert(&jobs[i], g, now))
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
