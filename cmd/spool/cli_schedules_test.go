package main

import (
	"strings"
	"testing"
)

func TestCLISchedules(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	s := b.okJSON("schedules", "put", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
		"--queue", "reports", "--kind", "build", "--payload", `{"x":1}`, "--misfire", "catch_up", "--max-catch-up", "10")
	job, _ := s["job"].(map[string]any)
	if s["name"] != "nightly" || s["cron"] != "0 3 * * *" || s["timezone"] != "Europe/Berlin" || s["misfire"] != "catch_up" ||
		s["max_catch_up"] != 10.0 || s["paused"] != false || s["next_run_at"] == nil || job["kind"] != "build" || job["queue"] != "reports" {
		t.Fatalf("schedules put --json: %v", s)
	}
	code, out, errOut := b.run("schedules", "put", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
		"--queue", "reports", "--kind", "build", "--payload", `{"x":1}`, "--misfire", "catch_up", "--max-catch-up", "10")
	if code != 0 || !hasRow(out, "nightly", "0", "3", "*", "*", "*", "(Europe/Berlin)", "reports", "build", "catch_up", "no") ||
		!strings.Contains(errOut, "replaced the definition of schedule nightly") {
		t.Fatalf("schedules put again: exit %d\n%s%s", code, out, errOut)
	}
	if e := b.okJSON("schedules", "put", "pulse", "--every", "1h", "--kind", "k", "--paused"); e["every_ms"] != 3600000.0 || e["paused"] != true || e["cron"] != nil {
		t.Fatalf("schedules put --every --paused: %v", e)
	}
	table := b.ok("schedules", "list")
	if !hasRow(table, "SCHEDULE", "TIMING", "QUEUE", "KIND", "MISFIRE", "PAUSED", "NEXT", "RUN") ||
		!hasRow(table, "nightly", "0", "3") || !hasRow(table, "pulse", "every", "1h0m0s", "default", "k", "skip", "yes") {
		t.Fatalf("schedules list:\n%s", table)
	}
	if list := b.okJSON("schedules", "list")["schedules"].([]any); len(list) != 2 {
		t.Fatalf("schedules list --json: %v", list)
	}
	detail := b.ok("schedules", "get", "nightly")
	if !hasRow(detail, "misfire:", "catch_up") || !hasRow(detail, "max", "catch-up:", "10") ||
		!hasRow(detail, "job:", `{"queue":"reports","kind":"build","payload":{"x":1}}`) {
		t.Fatalf("schedules get:\n%s", detail)
	}

	if p := b.okJSON("schedules", "pause", "nightly"); p["paused"] != true {
		t.Fatalf("schedules pause: %v", p)
	}
	fired := b.okJSON("schedules", "trigger", "nightly")
	id := fired["job"].(map[string]any)["id"].(string)
	if fired["schedule"].(map[string]any)["last_job_id"] != id {
		t.Fatalf("schedules trigger: %v", fired)
	}
	if j := b.okJSON("jobs", "get", id); j["queue"] != "reports" || j["kind"] != "build" {
		t.Fatalf("triggered job: %v", j)
	}
	if out := b.ok("schedules", "trigger", "nightly"); !hasRow(out, "ID", "STATE", "DUPLICATE") || !strings.Contains(out, "available") {
		t.Fatalf("schedules trigger table:\n%s", out)
	}
	if out := b.ok("schedules", "resume", "nightly"); !hasRow(out, "nightly", "0", "3", "*", "*", "*", "(Europe/Berlin)", "reports", "build", "catch_up", "no") {
		t.Fatalf("schedules resume:\n%s", out)
	}
	if out := b.ok("schedules", "delete", "nightly"); !strings.Contains(out, "deleted schedule nightly") {
		t.Fatalf("schedules delete: %q", out)
	}
	if code, _, errOut := b.run("schedules", "get", "nightly"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("get of a deleted schedule: %d %q", code, errOut)
	}
	b.okJSON("jobs", "get", id) // its jobs stay
}
