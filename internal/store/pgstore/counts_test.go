package pgstore

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// The queue listing finds each queue's oldest available job by seeks
// into the claim index, one or two per priority, however many jobs wait:
// on a table of 60,000 pending jobs it reads a few dozen pages, and never
// the table or a whole index.
func TestQueueListSeeksTheOldestAvailableJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	const perBatch = 10_000
	for b := range 6 {
		ps := make([]store.JobInsertParams, perBatch)
		for i := range ps {
			ps[i] = newParams(job.DurabilityFull)
			ps[i].Queue = []string{"a", "b"}[b%2]
			ps[i].Priority = i % 3
			ps[i].RunAt = t0.Add(time.Duration(b*perBatch+i) * time.Millisecond)
		}
		mustInsert(t, s, ps)
	}
	// The oldest job of the lowest priority of queue a: the listing must
	// look past the priorities a claim takes first.
	want := t0
	qs, err := s.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || !qs[0].OldestAvailable.Equal(want) || !qs[1].OldestAvailable.Equal(t0.Add(perBatch*time.Millisecond)) {
		t.Fatalf("queues %+v, want a's oldest at %v and b's at %v", qs, want, t0.Add(perBatch*time.Millisecond))
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE spool_jobs`); err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sqlQueues, "", true).Scan(&raw); err != nil {
		t.Fatalf("explain the queue listing: %v", err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("read the plan: %v\n%s", err, raw)
	}
	text := string(plan[0].Plan)
	if seq := regexp.MustCompile(`"Node Type": "Seq Scan",[^{}]*"Relation Name": "spool_jobs"`); seq.MatchString(text) {
		t.Errorf("the listing reads spool_jobs whole:\n%s", text)
	}
	if !regexp.MustCompile(`"Index Name": "spool_jobs_claim"`).MatchString(text) {
		t.Errorf("the listing does not use the claim index:\n%s", text)
	}
	var top struct {
		Hit  int `json:"Shared Hit Blocks"`
		Read int `json:"Shared Read Blocks"`
	}
	if err := json.Unmarshal(plan[0].Plan, &top); err != nil {
		t.Fatal(err)
	}
	// Each seek reads a root, an inner and a leaf page: 2 queues × (4
	// priority steps + 3 first jobs) × 3, and the counts.
	pages := top.Hit + top.Read
	t.Logf("the listing read %d pages", pages)
	if pages > 200 {
		t.Errorf("the listing read %d pages for 2 queues of 30,000 jobs each, want a few dozen:\n%s", pages, text)
	}
}
