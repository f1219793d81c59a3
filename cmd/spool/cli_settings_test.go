package main

import (
	"strings"
	"testing"
)

func TestCLISettings(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	q := b.okJSON("queues", "settings", "orders", "--dead-letter-queue", "orders-dlq", "--max-wait", "90s")
	s, _ := q["settings"].(map[string]any)
	if q["name"] != "orders" || s["dead_letter_queue"] != "orders-dlq" || s["max_wait_ms"] != 90000.0 {
		t.Fatalf("queues settings --json: %v", q)
	}
	// Without a setting flag the command shows the settings and changes nothing.
	shown := b.ok("queues", "settings", "orders")
	if !strings.Contains(shown, "SETTINGS") ||
		!hasRow(shown, "orders", "no", "full", "0", "0", "0", "0", "0", "0", "0", "dead-letter-queue=orders-dlq", "max-wait=1m30s") {
		t.Fatalf("queues settings without flags:\n%s", shown)
	}
	// The flags replace the settings as a whole.
	if table := b.ok("queues", "settings", "orders", "--dead-letter-queue", "orders-dlq"); !hasRow(table, "orders", "no", "full",
		"0", "0", "0", "0", "0", "0", "0", "dead-letter-queue=orders-dlq") || strings.Contains(table, "max-wait") {
		t.Fatalf("queues settings --dead-letter-queue:\n%s", table)
	}

	// A job that fails for good goes on to the dead-letter queue, whose
	// copy names it.
	id := b.okJSON("enqueue", "--queue", "orders", "--kind", "charge", "--max-attempts", "1")["id"].(string)
	job := b.okJSON("fetch", "--queue", "orders")["jobs"].([]any)[0].(map[string]any)
	b.ok("fail", id, "--token", formatInt(job["lease"].(map[string]any)["token"].(float64)), "--error", "card declined")
	copies := b.okJSON("jobs", "list", "--queue", "orders-dlq")["jobs"].([]any)
	if len(copies) != 1 {
		t.Fatalf("dead-letter queue holds %d jobs", len(copies))
	}
	c := copies[0].(map[string]any)
	if of, _ := c["dead_letter_of"].(map[string]any); of["queue"] != "orders" || of["id"] != id {
		t.Fatalf("copy %v", c)
	}
	if detail := b.ok("jobs", "get", c["id"].(string)); !hasRow(detail, "dead", "letter", "of:", "orders", id) {
		t.Fatalf("jobs get of the copy:\n%s", detail)
	}

	if q := b.okJSON("queues", "settings", "orders", "--clear"); q["settings"] != nil {
		t.Fatalf("queues settings --clear: %v", q)
	}
	if table := b.ok("queues", "get", "orders"); strings.Contains(table, "dead-letter-queue") {
		t.Fatalf("queues get after --clear:\n%s", table)
	}
}

func TestCLISettingsBadInput(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.refused([]refusal{
		{[]string{"queues", "settings"}, 2, "want 1 argument"},
		{[]string{"queues", "settings", "q", "--max-wait", "soon"}, 2, "invalid value"},
		{[]string{"queues", "settings", "q", "--max-wait", "0s"}, 2, "--max-wait must be positive"},
		{[]string{"queues", "settings", "q", "--dead-letter-queue", ""}, 2, "--dead-letter-queue must name a queue"},
		{[]string{"queues", "settings", "q", "--clear", "--max-wait", "1s"}, 2, "--clear takes no setting flag"},
		{[]string{"queues", "settings", "q", "--dead-letter-queue", "q"}, 1, "field dead_letter_queue"},
		{[]string{"queues", "settings", "q", "--dead-letter-queue", "bad name"}, 1, "field dead_letter_queue"},
		{[]string{"queues", "settings", "q", "--max-wait", "9000h"}, 1, "field max_wait_ms"},
		{[]string{"queues", "settings", "bad name", "--max-wait", "1s"}, 1, "field queue"},
		{[]string{"queues", "settings", "nosuch"}, 1, "not_found"},
	})
	if qs := b.okJSON("queues", "list")["queues"].([]any); len(qs) != 0 {
		t.Fatalf("bad input created queues: %v", qs)
	}
}
