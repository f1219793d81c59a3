package main

import (
	"slices"
	"strings"
	"testing"
)

func TestCLILimits(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	q := b.okJSON("queues", "limits", "api", "--create", "--rate", "100/1m", "--max-active", "7", "--group-rate", "3/1.5s", "--group-max-active", "2")
	l, _ := q["limits"].(map[string]any)
	rate, _ := l["rate"].(map[string]any)
	groupRate, _ := l["group_rate"].(map[string]any)
	if q["name"] != "api" || rate["limit"] != 100.0 || rate["period_ms"] != 60000.0 || l["max_active"] != 7.0 ||
		groupRate["limit"] != 3.0 || groupRate["period_ms"] != 1500.0 || l["group_max_active"] != 2.0 {
		t.Fatalf("queues limits --json: %v", q)
	}
	all := []string{"rate=100/1m", "max-active=7", "group-rate=3/1.5s", "group-max-active=2"}
	// Without a limit flag the command shows the limits and changes nothing.
	shown := b.ok("queues", "limits", "api")
	if !hasRow(shown, "QUEUE", "PAUSED", "DURABILITY") || !strings.Contains(shown, "LIMITS") ||
		!hasRow(shown, append([]string{"api", "no", "full", "0", "0", "0", "0", "0", "0", "0"}, all...)...) {
		t.Fatalf("queues limits without flags:\n%s", shown)
	}
	// The flags change the limits they name and leave the others; a bare
	// unit is one of it.
	if table := b.ok("queues", "limits", "api", "--rate", "10/s"); !hasRow(table, "api", "no", "full", "0", "0", "0", "0", "0", "0", "0",
		"rate=10/1s", "max-active=7", "group-rate=3/1.5s", "group-max-active=2") {
		t.Fatalf("queues limits --rate 10/s:\n%s", table)
	}
	// --unset removes the named ones.
	if table := b.ok("queues", "limits", "api", "--unset", "group-rate,max-active"); !hasRow(table, "api", "no", "full", "0", "0", "0", "0", "0", "0", "0",
		"rate=10/1s", "group-max-active=2") || strings.Contains(table, "max-active=7") || strings.Contains(table, "group-rate") {
		t.Fatalf("queues limits --unset group-rate,max-active:\n%s", table)
	}
	// --replace makes the flags the limits as a whole.
	b.ok("queues", "limits", "api", "--replace", "--max-active", "1", "--group-rate", "5/24h")
	if table := b.ok("queues", "list"); !hasRow(table, "api", "no", "full", "0", "0", "0", "0", "0", "0", "0", "max-active=1", "group-rate=5/24h") ||
		strings.Contains(table, "rate=10/1s") || strings.Contains(table, "group-max-active") {
		t.Fatalf("queues list with limits replaced:\n%s", table)
	}

	// The cap holds: of three jobs one is handed out.
	for range 3 {
		b.ok("enqueue", "--queue", "api", "--kind", "call", "--group", "tenant-42")
	}
	if jobs := b.okJSON("fetch", "--queue", "api", "--max", "5")["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("fetch under a cap of 1: %d jobs", len(jobs))
	}

	if q := b.okJSON("queues", "limits", "api", "--clear"); q["limits"] != nil {
		t.Fatalf("queues limits --clear: %v", q)
	}
	if table := b.ok("queues", "get", "api"); strings.Contains(table, "max-active") {
		t.Fatalf("queues get after --clear:\n%s", table)
	}
	if jobs := b.okJSON("fetch", "--queue", "api", "--max", "5")["jobs"].([]any); len(jobs) != 2 {
		t.Fatalf("fetch without limits: %d jobs, want the 2 left", len(jobs))
	}
}

func TestCLIGroup(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	id := b.okJSON("enqueue", "--queue", "g", "--kind", "k", "--group", "tenant-42")["id"].(string)
	if got := b.okJSON("jobs", "get", id)["group"]; got != "tenant-42" {
		t.Fatalf("job enqueued with --group: group %v", got)
	}
	if detail := b.ok("jobs", "get", id); !hasRow(detail, "group:", "tenant-42") {
		t.Fatalf("jobs get table:\n%s", detail)
	}
	plain := b.okJSON("enqueue", "--queue", "g", "--kind", "k")["id"].(string)
	if got, ok := b.okJSON("jobs", "get", plain)["group"]; ok {
		t.Fatalf("job enqueued without --group: group %v", got)
	}
	s := b.okJSON("schedules", "put", "per-tenant", "--every", "1h", "--queue", "g", "--kind", "k", "--group", "tenant-7")
	if job, _ := s["job"].(map[string]any); job["group"] != "tenant-7" {
		t.Fatalf("schedules put --group: %v", s)
	}
	fired := b.okJSON("schedules", "trigger", "per-tenant")
	if got := b.okJSON("jobs", "get", fired["job"].(map[string]any)["id"].(string))["group"]; got != "tenant-7" {
		t.Fatalf("job of a schedule put with --group: group %v", got)
	}
}

func TestCLILimitsBadInput(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.refused([]refusal{
		{[]string{"queues", "limits"}, 2, "want 1 argument"},
		{[]string{"queues", "limits", "q", "--rate", "100"}, 2, "want N/DURATION"},
		{[]string{"queues", "limits", "q", "--rate", "many/1s"}, 2, "not a whole number"},
		{[]string{"queues", "limits", "q", "--group-rate", "5/fortnight"}, 2, "read the window"},
		{[]string{"queues", "limits", "q", "--max-active", "0"}, 2, "--max-active must be at least 1"},
		{[]string{"queues", "limits", "q", "--group-max-active", "0"}, 2, "--group-max-active must be at least 1"},
		{[]string{"queues", "limits", "q", "--clear", "--max-active", "2"}, 2, "--clear takes no other flag"},
		{[]string{"queues", "limits", "q", "--unset", "speed"}, 2, `--unset: unknown name "speed"`},
		{[]string{"queues", "limits", "q", "--unset", "rate", "--rate", "1/s"}, 2, "contradict each other"},
		{[]string{"queues", "limits", "q", "--replace"}, 2, "--replace needs the flags to set"},
		{[]string{"queues", "limits", "q", "--replace", "--rate", "1/s", "--unset", "ordered"}, 2, "leave out --unset"},
		{[]string{"queues", "limits", "q", "--create", "--rate", "0/1s"}, 1, "field rate.limit"},
		{[]string{"queues", "limits", "q", "--create", "--group-rate", "5/25h"}, 1, "field group_rate.period_ms"},
		{[]string{"queues", "limits", "q", "--create", "--max-active", "-1"}, 1, "field max_active"},
		{[]string{"queues", "limits", "bad name", "--create", "--max-active", "1"}, 1, "field queue"},
		{[]string{"queues", "limits", "nosuch"}, 1, "not_found"},
		{[]string{"enqueue", "--kind", "k", "--group", "a\x00b"}, 1, "field group"},
		{[]string{"enqueue", "--kind", "k", "--group", strings.Repeat("g", 257)}, 1, "field group"},
		{[]string{"schedules", "put", "s", "--every", "1h", "--kind", "k", "--group", "a\x00b"}, 1, "field job.group"},
	})
	if qs := b.okJSON("queues", "list")["queues"].([]any); len(qs) != 0 {
		t.Fatalf("bad input created queues: %v", qs)
	}
}

// --ordered makes every group ordered: one job of a group
// out at a time, the group cap shown as 1.
func TestCLIOrdered(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	q := b.okJSON("queues", "limits", "events", "--create", "--ordered")
	l, _ := q["limits"].(map[string]any)
	if l["ordered"] != true || l["group_max_active"] != 1.0 {
		t.Fatalf("queues limits --ordered --json: %v", q)
	}
	if table := b.ok("queues", "get", "events"); !strings.Contains(table, "group-max-active=1 ordered") {
		t.Fatalf("queues get of an ordered queue:\n%s", table)
	}
	for range 2 {
		b.ok("enqueue", "--queue", "events", "--kind", "e", "--group", "order-7")
	}
	b.ok("enqueue", "--queue", "events", "--kind", "e", "--group", "order-8")
	b.ok("enqueue", "--queue", "events", "--kind", "e", "--group", "order-9")
	// --group takes one group's jobs alone.
	jobs := b.okJSON("fetch", "--queue", "events", "--max", "5", "--group", "order-9")["jobs"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["group"] != "order-9" {
		t.Fatalf("fetch --group order-9: %v", jobs)
	}
	if jobs := b.okJSON("fetch", "--queue", "events", "--max", "5", "--group", "order-9")["jobs"].([]any); len(jobs) != 0 {
		t.Fatalf("fetch --group order-9 while its job runs: %v", jobs)
	}
	if jobs := b.okJSON("fetch", "--queue", "events", "--max", "5")["jobs"].([]any); len(jobs) != 2 {
		t.Fatalf("fetch from an ordered queue with two groups: %d jobs, want one of each", len(jobs))
	}
	if code, _, errOut := b.run("fetch", "--queue", "events", "--group", "a\x00b"); code != 1 || !strings.Contains(errOut, "field group") {
		t.Fatalf("fetch --group with a NUL: exit %d, %s", code, errOut)
	}
	if code, _, errOut := b.run("queues", "limits", "events", "--ordered", "--group-max-active", "2"); code == 0 || !strings.Contains(errOut, "group_max_active") {
		t.Fatalf("--ordered with --group-max-active 2: exit %d, %s", code, errOut)
	}
}

// fetch --runs takes a free ordered group's jobs as one run, in enqueue
// order; without it the group gives one. With --max-groups 1 it takes one
// group's run of a queue with several free groups.
func TestCLIFetchRuns(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("queues", "limits", "events", "--create", "--ordered")
	var want []any
	for range 3 {
		want = append(want, b.okJSON("enqueue", "--queue", "events", "--kind", "e", "--group", "order-7")["id"])
	}
	b.ok("queues", "limits", "other", "--create", "--ordered")
	for range 3 {
		b.ok("enqueue", "--queue", "other", "--kind", "e", "--group", "order-7")
	}
	var got []any
	for _, j := range b.okJSON("fetch", "--queue", "events", "--max", "5", "--runs")["jobs"].([]any) {
		got = append(got, j.(map[string]any)["id"])
	}
	if len(want) != 3 || !slices.Equal(got, want) {
		t.Fatalf("fetch --runs: %v, want the group's jobs in enqueue order %v", got, want)
	}
	if jobs := b.okJSON("fetch", "--queue", "other", "--max", "5")["jobs"].([]any); len(jobs) != 1 {
		t.Fatalf("fetch without --runs: %d jobs, want 1", len(jobs))
	}

	// With --max-groups 1 a fetch takes one group's run, whichever group.
	b.ok("queues", "limits", "partitions", "--create", "--ordered")
	ids := map[string][]any{}
	for range 3 {
		for _, g := range []string{"p0", "p1", "p2"} {
			ids[g] = append(ids[g], b.okJSON("enqueue", "--queue", "partitions", "--kind", "e", "--group", g)["id"])
		}
	}
	jobs := b.okJSON("fetch", "--queue", "partitions", "--max", "10", "--runs", "--max-groups", "1")["jobs"].([]any)
	got = nil
	for _, j := range jobs {
		got = append(got, j.(map[string]any)["id"])
	}
	if len(jobs) == 0 || !slices.Equal(got, ids[jobs[0].(map[string]any)["group"].(string)]) {
		t.Fatalf("fetch --runs --max-groups 1: %v, want one group's 3 jobs in enqueue order of %v", got, ids)
	}
	b.refused([]refusal{
		{[]string{"fetch", "--queue", "partitions", "--max-groups", "0"}, 2, "--max-groups must be at least 1"},
		{[]string{"fetch", "--queue", "partitions", "--max-groups", "1001"}, 1, "max_groups"},
	})
}

// spool jobs get shows who holds a job, and after its run who ran it
// last; a job enqueued with --traceparent shows it.
func TestCLIJobWorkerAndTraceParent(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id := b.okJSON("enqueue", "--queue", "w", "--kind", "k", "--traceparent", tp)["id"].(string)
	if detail := b.ok("jobs", "get", id); !hasRow(detail, "traceparent:", tp) || strings.Contains(detail, "worker") {
		t.Fatalf("jobs get of a job never fetched:\n%s", detail)
	}
	jobs := b.okJSON("fetch", "--queue", "w", "--worker", "host-1/pid-77")["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("fetch: %v", jobs)
	}
	if got := b.okJSON("jobs", "get", id); got["worker"] != "host-1/pid-77" || got["traceparent"] != tp {
		t.Fatalf("jobs get --json of a fetched job: %v", got)
	}
	if detail := b.ok("jobs", "get", id); !hasRow(detail, "worker:", "host-1/pid-77") {
		t.Fatalf("jobs get of an active job:\n%s", detail)
	}
	token := jobs[0].(map[string]any)["lease"].(map[string]any)["token"].(float64)
	b.ok("ack", id, "--token", formatInt(token))
	if detail := b.ok("jobs", "get", id); !hasRow(detail, "last", "worker:", "host-1/pid-77") {
		t.Fatalf("jobs get of a completed job:\n%s", detail)
	}
	b.refused([]refusal{{[]string{"enqueue", "--queue", "w", "--kind", "k", "--traceparent", "nope"}, 1, "traceparent"}})
}

// spool workers lists who fetched, with what each holds, and spool jobs
// list --worker lists that.
func TestCLIWorkers(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	if table := b.ok("workers"); !hasRow(table, "WORKER", "ACTIVE", "FIRST", "SEEN", "LAST", "SEEN") {
		t.Fatalf("workers before any fetch:\n%s", table)
	}
	var ids []string
	for range 3 {
		ids = append(ids, b.okJSON("enqueue", "--queue", "w", "--kind", "k")["id"].(string))
	}
	b.ok("fetch", "--queue", "w", "--max", "2", "--worker", "box-1")
	b.ok("fetch", "--queue", "w", "--worker", "box-2")
	if table := b.ok("workers"); !hasRow(table, "box-1", "2") || !hasRow(table, "box-2", "1") {
		t.Fatalf("workers:\n%s", table)
	}
	ws := b.okJSON("workers")["workers"].([]any)
	if len(ws) != 2 || ws[0].(map[string]any)["name"] != "box-1" || ws[0].(map[string]any)["active"] != float64(2) {
		t.Fatalf("workers --json: %v", ws)
	}
	list := b.ok("jobs", "list", "--worker", "box-1")
	if !strings.Contains(list, ids[0]) || !strings.Contains(list, ids[1]) || strings.Contains(list, ids[2]) {
		t.Fatalf("jobs list --worker box-1:\n%s", list)
	}
	b.refused([]refusal{{[]string{"jobs", "list", "--worker", "box-1", "--state", "completed"}, 1, "worker"}})
}
