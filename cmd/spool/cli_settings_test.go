package main

import (
	"strings"
	"testing"
)

func TestCLISettings(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	q := b.okJSON("queues", "settings", "orders", "--create", "--dead-letter-queue", "orders-dlq", "--max-wait", "90s")
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
	// The flags change the settings they name and leave the others.
	if table := b.ok("queues", "settings", "orders", "--max-wait", "2m"); !hasRow(table, "orders", "no", "full",
		"0", "0", "0", "0", "0", "0", "0", "dead-letter-queue=orders-dlq", "max-wait=2m") {
		t.Fatalf("queues settings --max-wait 2m:\n%s", table)
	}
	// --replace makes the flags the settings as a whole.
	if table := b.ok("queues", "settings", "orders", "--replace", "--dead-letter-queue", "orders-dlq"); !hasRow(table, "orders", "no", "full",
		"0", "0", "0", "0", "0", "0", "0", "dead-letter-queue=orders-dlq") || strings.Contains(table, "max-wait") {
		t.Fatalf("queues settings --replace --dead-letter-queue:\n%s", table)
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

	// The job defaults are set beside the dead-letter queue, shown and
	// given to the jobs enqueued without their own.
	q = b.okJSON("queues", "settings", "orders", "--default-lease", "5m", "--default-max-attempts", "3", "--default-delay", "10s")
	s, _ = q["settings"].(map[string]any)
	if len(s) != 4 || s["dead_letter_queue"] != "orders-dlq" || s["default_lease_ms"] != 300000.0 || s["default_max_attempts"] != 3.0 || s["default_delay_ms"] != 10000.0 {
		t.Fatalf("queues settings with defaults --json: %v", q)
	}
	if table := b.ok("queues", "settings", "orders"); !hasRow(table, "orders", "no", "full",
		"0", "0", "0", "0", "0", "1", "0", "dead-letter-queue=orders-dlq", "default-lease=5m", "default-max-attempts=3", "default-delay=10s") {
		t.Fatalf("queues settings with defaults:\n%s", table)
	}
	// --unset removes the named ones.
	q = b.okJSON("queues", "settings", "orders", "--unset", "default-delay,default-max-attempts")
	if s, _ = q["settings"].(map[string]any); len(s) != 2 || s["dead_letter_queue"] != "orders-dlq" || s["default_lease_ms"] != 300000.0 {
		t.Fatalf("queues settings --unset: %v", q)
	}
	b.ok("queues", "settings", "orders", "--default-max-attempts", "3", "--default-delay", "10s")
	id = b.okJSON("enqueue", "--queue", "orders", "--kind", "charge")["id"].(string)
	if j := b.okJSON("jobs", "get", id); j["lease_ms"] != 300000.0 || j["max_attempts"] != 3.0 || j["state"] != "scheduled" {
		t.Fatalf("job with the queue's defaults: %v", j)
	}
	id = b.okJSON("enqueue", "--queue", "orders", "--kind", "charge", "--lease", "1s", "--max-attempts", "7", "--delay", "1h")["id"].(string)
	if j := b.okJSON("jobs", "get", id); j["lease_ms"] != 1000.0 || j["max_attempts"] != 7.0 || j["state"] != "scheduled" {
		t.Fatalf("job with its own values: %v", j)
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
		{[]string{"queues", "settings", "q", "--clear", "--max-wait", "1s"}, 2, "--clear takes no other flag"},
		{[]string{"queues", "settings", "q", "--clear", "--default-delay", "1s"}, 2, "--clear takes no other flag"},
		{[]string{"queues", "settings", "q", "--default-lease", "0s"}, 2, "--default-lease must be positive"},
		{[]string{"queues", "settings", "q", "--unset", "lease"}, 2, `--unset: unknown name "lease"`},
		{[]string{"queues", "settings", "q", "--unset", "max-wait", "--max-wait", "1s"}, 2, "contradict each other"},
		{[]string{"queues", "settings", "q", "--replace"}, 2, "--replace needs the flags to set"},
		{[]string{"queues", "settings", "q", "--default-max-attempts", "0"}, 2, "--default-max-attempts must be positive"},
		{[]string{"queues", "settings", "q", "--default-max-attempts", "many"}, 2, "invalid value"},
		{[]string{"queues", "settings", "q", "--default-delay", "-1s"}, 2, "--default-delay must be positive"},
		{[]string{"queues", "settings", "q", "--create", "--default-lease", "10ms"}, 1, "field default_lease_ms"},
		{[]string{"queues", "settings", "q", "--create", "--default-max-attempts", "1001"}, 1, "field default_max_attempts"},
		{[]string{"queues", "settings", "q", "--create", "--default-delay", "9000h"}, 1, "field default_delay_ms"},
		{[]string{"queues", "settings", "q", "--create", "--dead-letter-queue", "q"}, 1, "field dead_letter_queue"},
		{[]string{"queues", "settings", "q", "--create", "--dead-letter-queue", "bad name"}, 1, "field dead_letter_queue"},
		{[]string{"queues", "settings", "q", "--create", "--max-wait", "9000h"}, 1, "field max_wait_ms"},
		{[]string{"queues", "settings", "bad name", "--create", "--max-wait", "1s"}, 1, "field queue"},
		{[]string{"queues", "settings", "nosuch"}, 1, "not_found"},
	})
	if qs := b.okJSON("queues", "list")["queues"].([]any); len(qs) != 0 {
		t.Fatalf("bad input created queues: %v", qs)
	}
}
