package main

import (
	"strings"
	"testing"
)

// Consumer groups from the command line: created, fetched from, listed
// with their lag, moved back, deleted; a bad --from is refused.
func TestCLIConsumerGroups(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok("enqueue", "--queue", "events", "--kind", "e")
	g := b.okJSON("consumer-groups", "create", "events", "billing")
	if g["name"] != "billing" || g["pending"] != 1.0 {
		t.Fatalf("consumer-groups create --json: %v", g)
	}
	b.ok("consumer-groups", "create", "events", "audit", "--from", "new")
	b.ok("enqueue", "--queue", "events", "--kind", "e")
	jobs := b.okJSON("fetch", "--queue", "events", "--max", "5", "--consumer-group", "billing")["jobs"].([]any)
	if len(jobs) != 2 || jobs[0].(map[string]any)["consumer_group"] != "billing" {
		t.Fatalf("fetch --consumer-group billing: %v", jobs)
	}
	table := b.ok("consumer-groups", "list", "events")
	if !hasRow(table, "QUEUE", "GROUP", "PENDING", "ACTIVE", "COMPLETED", "DEAD", "LAG") ||
		!strings.Contains(table, "audit") || !strings.Contains(table, "billing") {
		t.Fatalf("consumer-groups list:\n%s", table)
	}
	if g := b.okJSON("consumer-groups", "seek", "events", "audit", "--from", "beginning"); g["replayed"] != 2.0 {
		t.Fatalf("consumer-groups seek --from beginning: %v", g)
	}
	b.ok("consumer-groups", "delete", "events", "audit")
	if code, _, errOut := b.run("consumer-groups", "get", "events", "audit"); code == 0 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("get a deleted group: exit %d, %s", code, errOut)
	}
	if code, _, errOut := b.run("consumer-groups", "create", "events", "x", "--from", "yesterday"); code != 2 || !strings.Contains(errOut, "--from") {
		t.Fatalf("--from yesterday: exit %d, %s", code, errOut)
	}
}
