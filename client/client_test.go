package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

func TestEnqueueFetchAckRoundTrip(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		res, err := b.c.Enqueue(b.ctx, client.EnqueueParams{
			Queue: "emails", Kind: "welcome", Payload: map[string]int{"user": 42}, Tags: []string{"signup"}, Priority: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ID == "" || res.State != client.StateAvailable || res.Duplicate {
			t.Fatalf("enqueue result: %+v", res)
		}
		if j := b.get(res.ID); j.State != client.StateAvailable || j.Attempt != 0 || j.Lease != nil || j.Priority != 5 {
			t.Fatalf("new job: %+v", j)
		}

		j := b.fetchOne("emails")
		if j.ID != res.ID || j.State != client.StateActive || j.Attempt != 1 || j.Lease == nil || j.Token() == 0 {
			t.Fatalf("fetched job: %+v", j)
		}
		if string(j.Payload) != `{"user":42}` || len(j.Tags) != 1 || j.Tags[0] != "signup" {
			t.Fatalf("fetched payload %s tags %v", j.Payload, j.Tags)
		}
		if time.Until(j.Lease.ExpiresAt) <= 0 || j.LeaseDuration != 30*time.Second {
			t.Fatalf("lease %+v, duration %v", j.Lease, j.LeaseDuration)
		}

		if err := b.c.Progress(b.ctx, j.ID, j.Token(), map[string]int{"pct": 50}); err != nil {
			t.Fatal(err)
		}
		ext, err := b.c.Extend(b.ctx, j.ID, j.Token(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ext.ID != j.ID || ext.CancelRequested || time.Until(ext.LeaseExpiresAt) < 50*time.Second {
			t.Fatalf("extend: %+v", ext)
		}
		if got := b.get(j.ID); string(got.Progress) != `{"pct":50}` {
			t.Fatalf("progress: %s", got.Progress)
		}

		ack, err := b.c.Ack(b.ctx, j.ID, j.Token(), map[string]bool{"sent": true})
		if err != nil {
			t.Fatal(err)
		}
		if ack.ID != j.ID || ack.State != client.StateCompleted {
			t.Fatalf("ack: %+v", ack)
		}
		done := b.get(j.ID)
		if done.State != client.StateCompleted || string(done.Result) != `{"sent":true}` || done.FinishedAt.IsZero() || done.Lease != nil {
			t.Fatalf("acked job: %+v", done)
		}
		if !done.State.Final() || client.StateActive.Final() {
			t.Fatal("State.Final is wrong")
		}
	})
}

func TestEnqueueOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(client.EnqueueParams{
		ID: "order-1", Queue: "opts", Kind: "k", Payload: json.RawMessage(`[1, 2]`),
		MaxAttempts: 7, Lease: 2 * time.Second, Delay: time.Hour,
		Backoff:   &client.Backoff{Type: client.BackoffFixed, Base: 250 * time.Millisecond},
		UniqueKey: "u-1", UniqueFor: time.Minute,
	})
	if id != "order-1" {
		t.Fatalf("id %q", id)
	}
	j := b.get(id)
	if j.State != client.StateScheduled || time.Until(j.RunAt) < 59*time.Minute {
		t.Fatalf("delayed job: state %s run at %v", j.State, j.RunAt)
	}
	if string(j.Payload) != `[1,2]` && string(j.Payload) != `[1, 2]` {
		t.Fatalf("raw payload: %s", j.Payload)
	}
	want := client.Backoff{Type: client.BackoffFixed, Base: 250 * time.Millisecond, Max: time.Hour, Jitter: 0}
	if j.MaxAttempts != 7 || j.LeaseDuration != 2*time.Second || j.Backoff != want ||
		j.UniqueKey != "u-1" || j.UniqueFor != time.Minute {
		t.Fatalf("job options: %+v", j)
	}

	// The same id, or the same unique key, is a duplicate.
	for _, p := range []client.EnqueueParams{
		{ID: "order-1", Queue: "opts", Kind: "k"},
		{Queue: "opts", Kind: "k", UniqueKey: "u-1", UniqueFor: time.Minute},
	} {
		res, err := b.c.Enqueue(b.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Duplicate || res.ID != "order-1" {
			t.Fatalf("duplicate enqueue %+v: %+v", p, res)
		}
	}

	at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	j = b.get(b.enqueue(client.EnqueueParams{Queue: "opts", Kind: "k", RunAt: at}))
	if !j.RunAt.Equal(at) || string(j.Payload) != "null" {
		t.Fatalf("run_at job: run at %v (want %v), payload %s", j.RunAt, at, j.Payload)
	}

	if _, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Kind: "k", Payload: json.RawMessage(`{bad`)}); err == nil {
		t.Fatal("invalid raw payload was sent")
	}
	if _, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Kind: "k", Payload: func() {}}); err == nil {
		t.Fatal("unencodable payload was sent")
	}
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		ps := make([]client.EnqueueParams, 50)
		for i := range ps {
			ps[i] = client.EnqueueParams{Queue: "batch", Kind: "k", Payload: i}
		}
		res, err := b.c.EnqueueBatch(b.ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 50 {
			t.Fatalf("%d results", len(res))
		}
		for i, r := range res {
			if r.ID == "" || r.State != client.StateAvailable || r.Duplicate {
				t.Fatalf("result %d: %+v", i, r)
			}
			if got := string(b.get(r.ID).Payload); got != strings.TrimSpace(mustJSON(t, i)) {
				t.Fatalf("result %d is job with payload %s", i, got)
			}
		}

		_, err = b.c.EnqueueBatch(b.ctx, []client.EnqueueParams{{Queue: "batch2", Kind: "k"}, {Queue: "batch2"}})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "jobs[1].kind" || apiErr.Status != 400 {
			t.Fatalf("invalid batch: %v (%+v)", err, apiErr)
		}
		if _, err := b.c.Queue(b.ctx, "batch2"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("a rejected batch left a queue behind: %v", err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		id := b.enqueue(client.EnqueueParams{Queue: "errs", Kind: "k"})
		j := b.fetchOne("errs")

		_, err := b.c.Ack(b.ctx, id, j.Token()+1, nil)
		var apiErr *client.Error
		if !errors.Is(err, client.ErrLeaseLost) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Code != "lease_lost" {
			t.Fatalf("stale ack: %v", err)
		}
		if !strings.HasPrefix(err.Error(), "ack job "+id+": lease_lost") {
			t.Fatalf("error text %q", err)
		}
		if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrInvalidState) {
			t.Fatal("lease_lost matches other sentinels")
		}
		if _, err := b.c.Fail(b.ctx, id, j.Token()+1, client.FailParams{Error: "x"}); !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("stale fail: %v", err)
		}
		if err := b.c.Progress(b.ctx, id, j.Token()+1, 1); !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("stale progress: %v", err)
		}

		for name, call := range map[string]func() error{
			"get":          func() error { _, err := b.c.Get(b.ctx, "nosuchjob"); return err },
			"get empty id": func() error { _, err := b.c.Get(b.ctx, ""); return err },
			"ack":          func() error { _, err := b.c.Ack(b.ctx, "nosuchjob", 1, nil); return err },
			"delete":       func() error { return b.c.Delete(b.ctx, "nosuchjob") },
			"queue":        func() error { _, err := b.c.Queue(b.ctx, "nosuchqueue"); return err },
		} {
			if err := call(); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("%s: %v, want not_found", name, err)
			}
		}

		_, err = b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "errs"})
		if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "kind" {
			t.Fatalf("enqueue without kind: %v", err)
		}
		_, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"bad queue!"}})
		if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "queues[0]" {
			t.Fatalf("fetch from a bad queue name: %v", err)
		}
		if _, err := b.c.Retry(b.ctx, id); !errors.Is(err, client.ErrInvalidState) {
			t.Fatalf("retry of an active job: %v", err)
		}
		if err := b.c.Delete(b.ctx, id); !errors.Is(err, client.ErrInvalidState) {
			t.Fatalf("delete of an active job: %v", err)
		}
	})
}

func TestBatchLeaseCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		for i := 0; i < 8; i++ {
			b.enqueue(client.EnqueueParams{Queue: "bl", Kind: "k", MaxAttempts: 3})
		}
		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"bl"}, Max: 8, Lease: 5 * time.Second, Worker: "test"})
		if err != nil || len(jobs) != 8 {
			t.Fatalf("fetch: %d jobs, %v", len(jobs), err)
		}
		if d := time.Until(jobs[0].Lease.ExpiresAt); d > 6*time.Second || d < 3*time.Second {
			t.Fatalf("fetch lease override: expires in %v", d)
		}

		ext, err := b.c.ExtendBatch(b.ctx, []client.ExtendItem{
			{ID: jobs[0].ID, Token: jobs[0].Token(), Lease: time.Minute},
			{ID: jobs[1].ID, Token: jobs[1].Token() + 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ext[0].Err != nil || time.Until(ext[0].LeaseExpiresAt) < 50*time.Second {
			t.Fatalf("extend item 0: %+v", ext[0])
		}
		if !errors.Is(ext[1].Err, client.ErrLeaseLost) || ext[1].ID != jobs[1].ID {
			t.Fatalf("stale extend item: %+v", ext[1])
		}

		acks, err := b.c.AckBatch(b.ctx, []client.AckItem{
			{ID: jobs[0].ID, Token: jobs[0].Token(), Result: "r0"},
			{ID: jobs[1].ID, Token: jobs[1].Token() + 5},
			{ID: "nosuchjob", Token: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		var itemErr *client.Error
		if acks[0].Err != nil || acks[0].State != client.StateCompleted ||
			!errors.Is(acks[1].Err, client.ErrLeaseLost) || !errors.As(acks[1].Err, &itemErr) || itemErr.Status != http.StatusConflict ||
			!errors.Is(acks[2].Err, client.ErrNotFound) {
			t.Fatalf("batch ack: %+v", acks)
		}
		if r := b.get(jobs[0].ID).Result; string(r) != `"r0"` {
			t.Fatalf("batch ack result: %s", r)
		}

		fails, err := b.c.FailBatch(b.ctx, []client.FailItem{
			{ID: jobs[2].ID, Token: jobs[2].Token(), Error: "later", RetryAfter: time.Hour},
			{ID: jobs[3].ID, Token: jobs[3].Token(), Error: "never", NoRetry: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		if fails[0].State != client.StateRetrying || time.Until(fails[0].RunAt) < 59*time.Minute || fails[1].State != client.StateDead {
			t.Fatalf("batch fail: %+v", fails)
		}

		rels, err := b.c.ReleaseBatch(b.ctx, []client.ReleaseItem{
			{ID: jobs[4].ID, Token: jobs[4].Token()},
			{ID: jobs[0].ID, Token: jobs[0].Token()},
		})
		if err != nil {
			t.Fatal(err)
		}
		if rels[0].Err != nil || rels[0].State != client.StateAvailable || !errors.Is(rels[1].Err, client.ErrLeaseLost) {
			t.Fatalf("batch release: %+v", rels)
		}
		if j := b.get(jobs[4].ID); j.State != client.StateAvailable || j.Attempt != 0 || len(j.Errors) != 0 {
			t.Fatalf("released job: %+v", j)
		}

		rel, err := b.c.Release(b.ctx, jobs[5].ID, jobs[5].Token())
		if err != nil || rel.State != client.StateAvailable {
			t.Fatalf("release: %+v, %v", rel, err)
		}
		fail, err := b.c.Fail(b.ctx, jobs[6].ID, jobs[6].Token(), client.FailParams{Error: "boom", RetryAfter: 10 * time.Minute})
		if err != nil || fail.State != client.StateRetrying || time.Until(fail.RunAt) < 9*time.Minute {
			t.Fatalf("fail: %+v, %v", fail, err)
		}
		if j := b.get(jobs[6].ID); len(j.Errors) != 1 || j.Errors[0].Message != "boom" || j.Errors[0].Attempt != 1 || j.Errors[0].At.IsZero() {
			t.Fatalf("failed job errors: %+v", j.Errors)
		}
		fail, err = b.c.Fail(b.ctx, jobs[7].ID, jobs[7].Token(), client.FailParams{Error: "bad input", NoRetry: true})
		if err != nil || fail.State != client.StateDead {
			t.Fatalf("fail without retry: %+v, %v", fail, err)
		}
	})
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := 0; i < 25; i++ {
		ids = append(ids, b.enqueue(client.EnqueueParams{Queue: "list", Kind: "k", Payload: i}))
	}
	b.enqueue(client.EnqueueParams{Queue: "other", Kind: "k"})

	var got []string
	p := client.ListParams{Queue: "list", Limit: 10}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("listing does not end")
		}
		page, err := b.c.List(b.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			got = append(got, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("paged listing:\n got %v\nwant %v", got, ids)
	}

	got = got[:0]
	for j, err := range b.c.ListAll(b.ctx, client.ListParams{Queue: "list", State: client.StateAvailable, Limit: 7}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("ListAll:\n got %v\nwant %v", got, ids)
	}
	n := 0
	for range b.c.ListAll(b.ctx, client.ListParams{Limit: 5}) {
		if n++; n == 12 {
			break
		}
	}
	if n != 12 {
		t.Fatalf("breaking out of ListAll: %d jobs seen", n)
	}
	page, err := b.c.List(b.ctx, client.ListParams{Queue: "list", State: client.StateCompleted})
	if err != nil || len(page.Jobs) != 0 || page.NextCursor != "" {
		t.Fatalf("empty listing: %+v, %v", page, err)
	}
	for _, err := range b.c.ListAll(b.ctx, client.ListParams{State: "nosuchstate"}) {
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("ListAll with a bad state: %v", err)
		}
	}
}

func TestAdminCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.c.Health(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.c.Ready(b.ctx); err != nil {
		t.Fatal(err)
	}

	for i := 0; i < 3; i++ {
		b.enqueue(client.EnqueueParams{Queue: "adm", Kind: "k"})
	}
	scheduled := b.enqueue(client.EnqueueParams{Queue: "adm", Kind: "k", Delay: time.Hour})
	q, err := b.c.Queue(b.ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "adm" || q.Paused || q.Counts.Available != 3 || q.Counts.Scheduled != 1 {
		t.Fatalf("queue: %+v", q)
	}

	q, err = b.c.PauseQueue(b.ctx, "adm")
	if err != nil || !q.Paused {
		t.Fatalf("pause: %+v, %v", q, err)
	}
	if jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"adm"}, Max: 10}); err != nil || len(jobs) != 0 {
		t.Fatalf("fetch from a paused queue: %d jobs, %v", len(jobs), err)
	}
	if q, err = b.c.ResumeQueue(b.ctx, "adm"); err != nil || q.Paused {
		t.Fatalf("resume: %+v, %v", q, err)
	}
	if _, err := b.c.PauseQueue(b.ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	qs, err := b.c.Queues(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, q := range qs {
		names[q.Name] = q.Paused
	}
	if len(qs) != 2 || names["adm"] || !names["empty"] {
		t.Fatalf("queues: %+v", qs)
	}

	j := b.fetchOne("adm")
	active, err := b.c.Cancel(b.ctx, j.ID)
	if err != nil || active.State != client.StateActive || !active.CancelRequested {
		t.Fatalf("cancel of an active job: %+v, %v", active, err)
	}
	if ack, err := b.c.Ack(b.ctx, j.ID, j.Token(), nil); err != nil || ack.State != client.StateCancelled {
		t.Fatalf("ack of a cancelled job: %+v, %v", ack, err)
	}
	if _, err := b.c.Cancel(b.ctx, j.ID); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	cancelled, err := b.c.Cancel(b.ctx, scheduled)
	if err != nil || cancelled.State != client.StateCancelled {
		t.Fatalf("cancel of a scheduled job: %+v, %v", cancelled, err)
	}
	retried, err := b.c.Retry(b.ctx, scheduled)
	if err != nil || retried.State != client.StateAvailable || retried.Attempt != 0 {
		t.Fatalf("retry: %+v, %v", retried, err)
	}

	if n, err := b.c.PurgeQueue(b.ctx, "adm"); err != nil || n != 3 {
		t.Fatalf("purge: %d, %v", n, err)
	}

	// Two dead jobs, retried and then deleted in bulk.
	for i := 0; i < 2; i++ {
		b.enqueue(client.EnqueueParams{Queue: "bulk", Kind: "k", MaxAttempts: 1})
		j := b.fetchOne("bulk")
		if _, err := b.c.Fail(b.ctx, j.ID, j.Token(), client.FailParams{Error: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.c.RetryQueueJobs(b.ctx, "bulk", client.StateDead); err != nil || n != 2 {
		t.Fatalf("retry dead jobs: %d, %v", n, err)
	}
	if n, err := b.c.DeleteQueueJobs(b.ctx, "bulk", client.StateAvailable); err != nil || n != 2 {
		t.Fatalf("delete available jobs: %d, %v", n, err)
	}
	if _, err := b.c.RetryQueueJobs(b.ctx, "bulk", client.StateCompleted); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("retry of completed jobs: %v", err)
	}
	if q, err := b.c.Queue(b.ctx, "bulk"); err != nil || q.Counts != (client.QueueCounts{}) {
		t.Fatalf("bulk queue after delete: %+v, %v", q, err)
	}

	del := b.enqueue(client.EnqueueParams{Queue: "adm", Kind: "k"})
	if err := b.c.Delete(b.ctx, del); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Get(b.ctx, del); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
}

func TestLongPollWakesOnEnqueue(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		type result struct {
			jobs []*client.Job
			err  error
		}
		got := make(chan result, 1)
		go func() {
			jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"lp"}, Wait: 10 * time.Second})
			got <- result{jobs, err}
		}()
		time.Sleep(50 * time.Millisecond) // let the fetch park; it works either way
		began := time.Now()
		id := b.enqueue(client.EnqueueParams{Queue: "lp", Kind: "k"})
		r := recv(t, got, 5*time.Second, "the long poll")
		if r.err != nil || len(r.jobs) != 1 || r.jobs[0].ID != id {
			t.Fatalf("long poll: %+v", r)
		}
		if took := time.Since(began); took > 2*time.Second {
			t.Fatalf("long poll answered %v after the enqueue", took)
		}
	})
}

func TestOptionsAndForeignErrors(t *testing.T) {
	t.Parallel()
	headers := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	c := client.New(srv.URL+"/", client.WithToken("s3cret"), client.WithUserAgent("tester/1"),
		client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := c.Enqueue(ctx, client.EnqueueParams{Kind: "k"})
	h := recv(t, headers, time.Second, "the request")
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("User-Agent") != "tester/1" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers: %v", h)
	}
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadGateway || apiErr.Code != "" || !strings.Contains(apiErr.Message, "bad gateway") {
		t.Fatalf("foreign error: %v", err)
	}
	if errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrInternal) {
		t.Fatal("a foreign error matches a catalog sentinel")
	}
}

func TestTransportErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := client.New("http://" + addr)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err = c.Ack(ctx, "job-1", 3, nil)
	var apiErr *client.Error
	if err == nil || errors.As(err, &apiErr) || !strings.HasPrefix(err.Error(), "ack job job-1: ") {
		t.Fatalf("transport error: %v", err)
	}
}

func TestJobJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := client.Job{
		ID: "j1", Queue: "q", Kind: "k", Payload: json.RawMessage(`{"a":1}`), State: client.StateActive,
		Attempt: 2, MaxAttempts: 5, LeaseDuration: 1500 * time.Millisecond, UniqueFor: time.Minute, UniqueKey: "u",
		Durability: client.DurabilityProcess,
		Backoff:    client.Backoff{Type: client.BackoffExponential, Base: time.Second, Max: time.Hour, Jitter: 0.2},
		Lease:      &client.Lease{Token: 9, ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)},
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"lease_ms":1500`, `"unique_for_ms":60000`, `"base_ms":1000`, `"token":9`, `"durability":"process"`} {
		if !strings.Contains(string(data), field) {
			t.Fatalf("%s lacks %s", data, field)
		}
	}
	var out client.Job
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.LeaseDuration != in.LeaseDuration || out.UniqueFor != in.UniqueFor || out.Backoff != in.Backoff || out.Durability != in.Durability ||
		out.Token() != 9 || !out.Lease.ExpiresAt.Equal(in.Lease.ExpiresAt) || string(out.Payload) != `{"a":1}` {
		t.Fatalf("round trip: %+v", out)
	}
}

// EnqueueAndWait returns the job's result once a worker acks it; Await of
// a job that stays pending ends with the context.
func TestEnqueueAndWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	go func() {
		for {
			jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"calc"}, Wait: 5 * time.Second})
			if err != nil {
				return
			}
			for _, j := range jobs {
				if _, err := b.c.Ack(b.ctx, j.ID, j.Lease.Token, map[string]int{"sum": 5}); err != nil {
					return
				}
				return
			}
		}
	}()
	j, err := b.c.EnqueueAndWait(b.ctx, client.EnqueueParams{Queue: "calc", Kind: "add", Payload: []int{2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != client.StateCompleted || string(j.Result) != `{"sum":5}` {
		t.Fatalf("awaited job: %s %s", j.State, j.Result)
	}
	res, err := b.c.Enqueue(b.ctx, client.EnqueueParams{Queue: "idle", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.c.Await(ctx, res.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await of a pending job past its deadline: %v, want DeadlineExceeded", err)
	}
}
