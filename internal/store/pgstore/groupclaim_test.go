package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// importGrouped imports available jobs of queue, one for each of groups
// ("" for none), with ids prefix0, prefix1, … and run times t0+i s.
func importGrouped(t *testing.T, s *Store, queue, prefix string, groups ...string) []string {
	t.Helper()
	var jobs []*job.Job
	var ids []string
	for i, g := range groups {
		id := fmt.Sprintf("%s%d", prefix, i)
		jobs = append(jobs, &job.Job{ID: id, Queue: queue, Kind: "k", State: job.StateAvailable,
			RunAt: t0.Add(time.Duration(i) * time.Second), CreatedAt: t0, MaxAttempts: 3, LeaseDuration: time.Minute, Group: g,
			Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour}})
		ids = append(ids, id)
	}
	if n, err := s.ImportJobs(context.Background(), jobs); err != nil || n != len(jobs) {
		t.Fatalf("import %d jobs into %s: %d, %v", len(jobs), queue, n, err)
	}
	return ids
}

// Jobs imported with groups into a queue without flow control are claimed
// the plain way; a claim of one group takes that group's alone there too,
// from one queue and from several, and kills the jobs of the group past
// their wait that it meets.
func TestClaimOfAGroupFromAPlainQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	imp := importGrouped(t, s, "imp", "imp", "a", "b", "", "a", "a")
	more := importGrouped(t, s, "more", "more", "a", "")
	if err := s.QueueSetSettings(ctx, "imp", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// Half a second past a minute the first job of imp (due at t0) is
	// past its wait; the others, due a second or more later, are not.
	now := t0.Add(time.Minute + 500*time.Millisecond)
	claim := func(max int, queues ...string) []*job.Job {
		t.Helper()
		js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: queues, Max: max, Group: "a", Now: now}))
		if err != nil {
			t.Fatalf("claim of group a from %v: %v", queues, err)
		}
		return js
	}
	if js := claim(1, "imp"); !slices.Equal(idsOf(js), []string{imp[3]}) {
		t.Fatalf("claim of group a from imp: %v, want %s", idsOf(js), imp[3])
	}
	if j, err := s.JobGet(ctx, imp[0]); err != nil || j.State != job.StateDead {
		t.Fatalf("the job of group a past its wait: %+v, %v; want dead", j, err)
	}
	if js := claim(10, "imp", "more"); !slices.Equal(idsOf(js), []string{more[0], imp[4]}) {
		t.Fatalf("claim of group a from imp and more: %v, want %v", idsOf(js), []string{more[0], imp[4]})
	}
	if js := claim(10, "imp", "more"); len(js) != 0 {
		t.Fatalf("claim of group a once it ran dry: %v", idsOf(js))
	}
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"imp", "more"}, Max: 10, Now: now}))
	if got, want := idsOf(js), []string{imp[1], imp[2], more[1]}; err != nil || !slices.Equal(sortedCopy(got), sortedCopy(want)) {
		t.Fatalf("claim without a group after: %v, %v; want %v", got, err, want)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// Every statement of a claim of one group reaches the group's jobs with a
// seek into the group claim index by queue and group (and counts its
// active jobs and finds its holder with seeks into the held index): none
// reads the jobs of the queue's other groups.
func TestClaimOfAGroupSeeksTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetLimits(ctx, "q", job.Limits{GroupMaxActive: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetLimits(ctx, "o", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"a", "b", "c"} {
		mustInsert(t, s, groupJobs("q", g, 20))
		mustInsert(t, s, groupJobs("o", g, 20))
	}
	importGrouped(t, s, "imp", "imp", "a", "b", "a")
	if err := s.QueueSetSettings(ctx, "imp", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Tables this small are read whole unless the planner must use indexes.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	seek := func(index, state string) *regexp.Regexp {
		return regexp.MustCompile(`"Index Name": "` + index + `",[^}]*"Index Cond": "(?:[^"\\]|\\.)*` + state + `(?:[^"\\]|\\.)*\(grp = 'a'`)
	}
	claimIndex := seek("spool_jobs_group_claim", "")
	count := seek("spool_jobs_group_held", `\(state = 'active'::text\) AND `)
	holder := seek("spool_jobs_group_held", `\(state = '(retrying|scheduled)'::text\) AND `)
	now := micro(t0)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  map[string]*regexp.Regexp
	}{
		{"group lookup", sqlGroupOne + groupsTail, []any{"q", "a", false, 9, 2, true, false},
			map[string]*regexp.Regexp{"find the group": claimIndex, "count its active jobs": count}},
		{"ordered group lookup", sqlGroupOne + orderedGroupsTail, []any{"o", "a", false, 9, 1, true, false},
			map[string]*regexp.Regexp{"find the group": claimIndex, "count its active jobs": count, "look up its holder": holder}},
		{"look for the group's jobs", sqlGroupAvailable, []any{"q", "a"}, map[string]*regexp.Regexp{"find them": claimIndex}},
		{"plain claim of one queue", sqlClaimOneGroup, []any{"imp", now, int64(0), 10, "", "a"}, map[string]*regexp.Regexp{"read the jobs": claimIndex}},
		{"plain claim of several queues", sqlClaimManyGroup, []any{[]string{"imp", "q"}, now, int64(0), 10, "", "a"},
			map[string]*regexp.Regexp{"read the jobs": claimIndex}},
	} {
		var plan string
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.query, c.args...).Scan(&plan); err != nil {
			t.Fatalf("explain the %s: %v", c.name, err)
		}
		for what, re := range c.want {
			if !re.MatchString(plan) {
				t.Errorf("the %s does not %s with a seek by group:\n%s", c.name, what, plan)
			}
		}
	}
}
