// Package storecopy moves a data set from one store to another: every job,
// in every state, exactly as the source holds it (attempts, lease tokens and
// expiries, errors, results, times, durability, the dead job a dead-letter
// copy came from, the worker that leased it last, its traceparent, the jobs
// of consumer groups), in enqueue order; every
// queue with its paused flag, default durability, settings, limits and
// consumer groups; and every cron schedule with how far it fired. `spool migrate-store` uses it to move an
// embedded SQLite store into PostgreSQL when one machine is no longer
// enough. The dashboard's login sessions (session.Store) are not copied:
// they are short-lived, and their users log in again on the new store.
package storecopy

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// PageSize is how many jobs one step of the copy reads and writes.
const PageSize = 1000

// Source is a store to copy from.
type Source interface {
	store.Admin
	store.Scheduler
	store.ConsumerGroups
}

// Importer is a store that can take jobs exactly as another store holds
// them. Importing a job whose id it already has is a no-op, so that an
// interrupted copy can be run again.
type Importer interface {
	store.Admin
	store.Scheduler
	store.ConsumerGroups
	// ImportJobs stores jobs as given, in order, and returns how many it
	// stored (jobs already there are skipped).
	ImportJobs(ctx context.Context, jobs []*job.Job) (int, error)
}

// Result is what a copy did.
type Result struct {
	// Jobs is how many jobs the source holds.
	Jobs int
	// Copied is how many of them this run stored (the rest were there).
	Copied int
	// Queues is how many queues the source knows.
	Queues int
	// Schedules is how many cron schedules the source holds.
	Schedules int
}

// Copy copies every queue and job of src into dst, then checks that every
// queue of dst has the paused flag, the default durability, the settings
// and the counts of src. The source must
// not change meanwhile (stop its server first); dst should hold nothing
// else, or the check fails.
func Copy(ctx context.Context, src Source, dst Importer) (Result, error) {
	var res Result
	queues, err := src.QueueList(ctx)
	if err != nil {
		return res, fmt.Errorf("list queues: %w", err)
	}
	res.Queues = len(queues)
	for _, q := range queues {
		if err := dst.QueueSetPaused(ctx, q.Name, q.Paused); err != nil {
			return res, fmt.Errorf("copy queue %s: %w", q.Name, err)
		}
		if err := dst.QueueSetDurability(ctx, q.Name, levelOf(q.Durability)); err != nil {
			return res, fmt.Errorf("copy queue %s: %w", q.Name, err)
		}
		if !q.Settings.IsZero() {
			if err := dst.QueueSetSettings(ctx, q.Name, q.Settings); err != nil {
				return res, fmt.Errorf("copy queue %s: %w", q.Name, err)
			}
		}
		if err := copyGroups(ctx, src, dst, q.Name); err != nil {
			return res, err
		}
	}
	schedules, err := src.ScheduleList(ctx)
	if err != nil {
		return res, fmt.Errorf("list schedules: %w", err)
	}
	res.Schedules = len(schedules)
	for _, sc := range schedules {
		if _, _, err := dst.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Schedule: *sc, Exact: true}); err != nil {
			return res, fmt.Errorf("copy schedule %s: %w", sc.Name, err)
		}
	}
	cursor := ""
	for {
		page, err := src.JobList(ctx, &job.ListParams{Cursor: cursor, Limit: PageSize})
		if err != nil {
			return res, fmt.Errorf("read jobs: %w", err)
		}
		n, err := dst.ImportJobs(ctx, page.Jobs)
		if err != nil {
			return res, fmt.Errorf("copy jobs: %w", err)
		}
		res.Jobs, res.Copied = res.Jobs+len(page.Jobs), res.Copied+n
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	// Limits come after the jobs, so that limits that group a queue see
	// its jobs.
	for _, q := range queues {
		if !q.Limits.IsZero() {
			if err := dst.QueueSetLimits(ctx, q.Name, q.Limits); err != nil {
				return res, fmt.Errorf("copy limits of queue %s: %w", q.Name, err)
			}
		}
	}
	return res, Verify(ctx, src, dst)
}

// Verify fails unless dst has every queue of src with the same paused
// flag, the same default durability, the same settings and limits, the
// same consumer groups and the same number of jobs in every state.
func Verify(ctx context.Context, src, dst Source) error {
	want, err := src.QueueList(ctx)
	if err != nil {
		return fmt.Errorf("verify: list source queues: %w", err)
	}
	for _, q := range want {
		got, err := dst.QueueGet(ctx, q.Name)
		if err != nil {
			return fmt.Errorf("verify queue %s: %w", q.Name, err)
		}
		if got.Paused != q.Paused {
			return fmt.Errorf("verify queue %s: paused %v, the source says %v", q.Name, got.Paused, q.Paused)
		}
		if levelOf(got.Durability) != levelOf(q.Durability) {
			return fmt.Errorf("verify queue %s: durability %s, the source says %s", q.Name, levelOf(got.Durability), levelOf(q.Durability))
		}
		if got.Settings != q.Settings {
			return fmt.Errorf("verify queue %s: settings %v, the source says %v", q.Name, got.Settings, q.Settings)
		}
		if got.Limits != q.Limits {
			return fmt.Errorf("verify queue %s: limits %+v, the source says %+v", q.Name, got.Limits, q.Limits)
		}
		if err := verifyGroups(ctx, src, dst, q.Name); err != nil {
			return err
		}
		for _, st := range job.States {
			if got.Counts[st] != q.Counts[st] {
				return fmt.Errorf("verify queue %s: %d %s jobs, the source has %d (did the target hold other jobs?)",
					q.Name, got.Counts[st], st, q.Counts[st])
			}
		}
	}
	return nil
}

// levelOf is a queue's durability as the contract reads it: empty is full.
func levelOf(d job.Durability) job.Durability {
	if d == "" {
		return job.DurabilityFull
	}
	return d
}

// copyGroups creates in dst the consumer groups of src's queue, before
// any job: a group created then copies nothing, and its jobs come along
// as the jobs of its lane.
func copyGroups(ctx context.Context, src Source, dst Importer, queue string) error {
	if _, _, lane := job.SplitLane(queue); lane {
		return nil
	}
	groups, err := src.ConsumerGroupList(ctx, queue)
	if err != nil {
		return fmt.Errorf("list consumer groups of %s: %w", queue, err)
	}
	for _, g := range groups {
		p := &store.ConsumerGroupParams{Queue: queue, Name: g.Name, Start: job.StartNew, Now: g.CreatedAt}
		if _, err := dst.ConsumerGroupCreate(ctx, p); err != nil {
			return fmt.Errorf("copy consumer group %s of %s: %w", g.Name, queue, err)
		}
	}
	return nil
}

// verifyGroups fails unless dst's queue has the consumer groups of src's.
func verifyGroups(ctx context.Context, src, dst store.ConsumerGroups, queue string) error {
	want, err := src.ConsumerGroupList(ctx, queue)
	if err != nil {
		return fmt.Errorf("verify queue %s: list source consumer groups: %w", queue, err)
	}
	got, err := dst.ConsumerGroupList(ctx, queue)
	if err != nil {
		return fmt.Errorf("verify queue %s: list consumer groups: %w", queue, err)
	}
	names := func(gs []job.ConsumerGroup) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = g.Name
		}
		return out
	}
	if !slices.Equal(names(got), names(want)) {
		return fmt.Errorf("verify queue %s: consumer groups %v, the source has %v", queue, names(got), names(want))
	}
	return nil
}
