package store

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func TestPlanInserts(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	stored := func(id, queue, key string, st job.State, created time.Time) *job.Job {
		return &job.Job{ID: id, Queue: queue, UniqueKey: key, State: st, CreatedAt: created}
	}
	jp := func(id, queue, key string, uniqueFor time.Duration) JobInsertParams {
		return JobInsertParams{ID: id, Queue: queue, UniqueKey: key, UniqueFor: uniqueFor, State: job.StateAvailable}
	}
	tests := []struct {
		name   string
		jobs   []JobInsertParams
		byID   []*job.Job
		newest []*job.Job
		insert []int
		dupOf  map[int]string // job index → id of the job it duplicates
		taken  string         // the field of the IDTakenError, if any
	}{
		{name: "plain", jobs: []JobInsertParams{jp("a", "q", "", 0), jp("b", "q", "", 0)}, insert: []int{0, 1}},
		{name: "id repeated in the batch", jobs: []JobInsertParams{jp("a", "q", "", 0), jp("a", "q", "", 0)},
			insert: []int{0}, dupOf: map[int]string{1: "a"}},
		{name: "id repeated in another queue", jobs: []JobInsertParams{jp("a", "q", "", 0), jp("a", "r", "", 0)},
			insert: []int{0}, taken: "jobs[1].id"},
		{name: "id of a stored job", jobs: []JobInsertParams{jp("b", "q", "", 0), jp("a", "q", "", 0)},
			byID: []*job.Job{stored("a", "q", "", job.StateCompleted, now)}, insert: []int{0}, dupOf: map[int]string{1: "a"}},
		{name: "id of a stored job of another queue", jobs: []JobInsertParams{jp("a", "r", "", 0)},
			byID: []*job.Job{stored("a", "q", "", job.StateAvailable, now)}, taken: "jobs[0].id"},
		{name: "key of a pending stored job", jobs: []JobInsertParams{jp("b", "q", "k", 0)},
			newest: []*job.Job{stored("a", "q", "k", job.StateAvailable, now)}, dupOf: map[int]string{0: "a"}},
		{name: "key of a finished stored job", jobs: []JobInsertParams{jp("b", "q", "k", 0)},
			newest: []*job.Job{stored("a", "q", "k", job.StateCompleted, now)}, insert: []int{0}},
		{name: "key within its window", jobs: []JobInsertParams{jp("b", "q", "k", time.Hour)},
			newest: []*job.Job{stored("a", "q", "k", job.StateCompleted, now.Add(-time.Minute))}, dupOf: map[int]string{0: "a"}},
		{name: "key past its window", jobs: []JobInsertParams{jp("b", "q", "k", time.Minute)},
			newest: []*job.Job{stored("a", "q", "k", job.StateCompleted, now.Add(-time.Hour))}, insert: []int{0}},
		{name: "key in another queue", jobs: []JobInsertParams{jp("b", "r", "k", 0)},
			newest: []*job.Job{stored("a", "q", "k", job.StateAvailable, now)}, insert: []int{0}},
		{name: "key of an earlier job of the batch", jobs: []JobInsertParams{jp("a", "q", "k", 0), jp("b", "q", "k", 0), jp("c", "q", "", 0)},
			insert: []int{0, 2}, dupOf: map[int]string{1: "a"}},
		{name: "the batch's job is newer than the stored one",
			jobs:   []JobInsertParams{jp("b", "q", "k", time.Minute), jp("c", "q", "k", time.Minute)},
			newest: []*job.Job{stored("a", "q", "k", job.StateCompleted, now.Add(-time.Hour))},
			insert: []int{0}, dupOf: map[int]string{1: "b"}},
		{name: "repeat of a duplicate", jobs: []JobInsertParams{jp("b", "q", "k", 0), jp("b", "q", "k", 0)},
			newest: []*job.Job{stored("a", "q", "k", job.StateAvailable, now)}, dupOf: map[int]string{0: "a", 1: "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			byID := make(map[string]*job.Job)
			for _, j := range tt.byID {
				byID[j.ID] = j
			}
			newest := make(map[UniqueRef]*job.Job)
			for _, j := range tt.newest {
				newest[UniqueRef{j.Queue, j.UniqueKey}] = j
			}
			out := make([]InsertResult, len(tt.jobs))
			plan, err := PlanInserts(tt.jobs, byID, newest, now, out)
			if err == nil {
				if len(plan.Insert) != len(tt.insert) {
					t.Fatalf("insert %v, want %v", plan.Insert, tt.insert)
				}
				for k, i := range plan.Insert {
					if i != tt.insert[k] {
						t.Fatalf("insert %v, want %v", plan.Insert, tt.insert)
					}
					out[i] = InsertResult{Job: &job.Job{ID: tt.jobs[i].ID, Queue: tt.jobs[i].Queue}}
				}
				err = plan.SettleDuplicates(tt.jobs, out)
			}
			if tt.taken != "" {
				var e *job.IDTakenError
				if !errors.As(err, &e) || e.Field != tt.taken {
					t.Fatalf("err %v, want an id taken error on %s", err, tt.taken)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range out {
				want, dup := tt.dupOf[i]
				switch {
				case r.Job == nil:
					t.Errorf("job %d: no result", i)
				case r.Duplicate != dup:
					t.Errorf("job %d: duplicate %v, want %v", i, r.Duplicate, dup)
				case dup && r.Job.ID != want:
					t.Errorf("job %d: duplicate of %s, want of %s", i, r.Job.ID, want)
				}
			}
		})
	}
}
