package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// cliBundle runs CLI commands against a real server on a temporary folder.
type cliBundle struct {
	t      *testing.T
	server string
}

func setupCLI(t *testing.T) *cliBundle {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	srv := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return &cliBundle{t: t, server: "http://" + srv.Addr()}
}

// run runs one client command and returns its exit code and output.
func (b *cliBundle) run(args ...string) (code int, stdout, stderr string) {
	b.t.Helper()
	return b.runIn(strings.NewReader(""), args...)
}

// runIn runs one client command with in as its standard input.
func (b *cliBundle) runIn(in io.Reader, args ...string) (code int, stdout, stderr string) {
	b.t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{in: in, out: &out, errOut: &errOut, getenv: func(k string) string {
		if k == "SPOOL_SERVER" {
			return b.server
		}
		return ""
	}}
	code = c.run(args)
	return code, out.String(), errOut.String()
}

// refusal is a command that must fail: the exit code it must end with
// and a text its error must hold.
type refusal struct {
	args []string
	code int
	want string
}

// refused runs each command of cases and checks its refusal.
func (b *cliBundle) refused(cases []refusal) {
	b.t.Helper()
	for _, tc := range cases {
		code, _, errOut := b.run(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			b.t.Errorf("spool %s: exit %d %q, want exit %d mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
}

// ok runs a command that must succeed.
func (b *cliBundle) ok(args ...string) string {
	b.t.Helper()
	code, out, errOut := b.run(args...)
	if code != 0 {
		b.t.Fatalf("spool %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// okJSON runs a command with --json and decodes its output.
func (b *cliBundle) okJSON(args ...string) map[string]any {
	b.t.Helper()
	out := b.ok(append(args, "--json")...)
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		b.t.Fatalf("spool %s --json: %v: %q", strings.Join(args, " "), err, out)
	}
	return v
}

func TestCLITour(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	enq := b.okJSON("enqueue", "--queue", "emails", "--kind", "welcome", "--payload", `{"user":42}`, "--tag", "signup")
	id := enq["id"].(string)
	if enq["state"] != "available" || enq["duplicate"] != false {
		t.Fatalf("enqueue: %v", enq)
	}
	table := b.ok("queues", "list")
	if !hasRow(table, "QUEUE", "PAUSED", "DURABILITY", "SCHEDULED", "AVAILABLE") || !hasRow(table, "emails", "no", "full", "0", "1") {
		t.Fatalf("queues list:\n%s", table)
	}
	fetched := b.okJSON("fetch", "--queue", "emails", "--max", "5")
	jobs := fetched["jobs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("fetch: %v", fetched)
	}
	token := jobs[0].(map[string]any)["lease"].(map[string]any)["token"].(float64)
	ack := b.okJSON("ack", id, "--token", formatInt(token), "--result", `{"sent":true}`)
	if ack["state"] != "completed" {
		t.Fatalf("ack: %v", ack)
	}
	list := b.ok("jobs", "list", "--queue", "emails", "--state", "completed")
	if !strings.Contains(list, id) || !strings.Contains(list, "welcome") {
		t.Fatalf("jobs list:\n%s", list)
	}
	got := b.okJSON("jobs", "get", id)
	if got["state"] != "completed" || got["result"].(map[string]any)["sent"] != true {
		t.Fatalf("jobs get: %v", got)
	}
	if got := b.okJSON("jobs", "get", id, "--wait"); got["state"] != "completed" {
		t.Fatalf("jobs get --wait of a completed job: %v", got)
	}
	if detail := b.ok("jobs", "get", id); !strings.Contains(detail, `{"sent":true}`) || !strings.Contains(detail, "signup") {
		t.Fatalf("jobs get table:\n%s", detail)
	}
}

func TestCLIManagement(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	later := b.okJSON("enqueue", "--queue", "m", "--kind", "k", "--delay", "1h")["id"].(string)
	if c := b.okJSON("jobs", "cancel", later); c["state"] != "cancelled" {
		t.Fatalf("cancel: %v", c)
	}
	if r := b.okJSON("jobs", "retry", later); r["state"] != "available" {
		t.Fatalf("retry: %v", r)
	}
	if q := b.okJSON("queues", "pause", "m"); q["paused"] != true {
		t.Fatalf("pause: %v", q)
	}
	if f := b.okJSON("fetch", "--queue", "m"); len(f["jobs"].([]any)) != 0 {
		t.Fatalf("paused queue handed out %v", f)
	}
	b.ok("queues", "resume", "m")
	f := b.okJSON("fetch", "--queue", "m")["jobs"].([]any)[0].(map[string]any)
	token := formatInt(f["lease"].(map[string]any)["token"].(float64))
	if out := b.okJSON("fail", later, "--token", token, "--error", "boom", "--no-retry"); out["state"] != "dead" {
		t.Fatalf("fail: %v", out)
	}
	if n := b.okJSON("queues", "retry", "m", "--state", "dead"); n["count"].(float64) != 1 {
		t.Fatalf("bulk retry: %v", n)
	}
	b.ok("enqueue", "--queue", "m", "--kind", "k")
	if out := b.ok("queues", "purge", "m"); !strings.Contains(out, "purged 2 jobs") {
		t.Fatalf("purge: %q", out)
	}
	gone := b.okJSON("enqueue", "--queue", "m", "--kind", "k")["id"].(string)
	b.ok("jobs", "delete", gone)
	if code, _, errOut := b.run("jobs", "get", gone); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("get of a deleted job: %d %q", code, errOut)
	}
}

func TestCLIDurability(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	memory := b.okJSON("enqueue", "--queue", "d", "--kind", "k", "--durability", "memory")["id"].(string)
	if got := b.okJSON("jobs", "get", memory)["durability"]; got != "memory" {
		t.Fatalf("job enqueued with --durability memory: durability %v", got)
	}
	if detail := b.ok("jobs", "get", memory); !hasRow(detail, "durability:", "memory") {
		t.Fatalf("jobs get table:\n%s", detail)
	}
	before := b.okJSON("enqueue", "--queue", "d", "--kind", "k")["id"].(string)
	if q := b.okJSON("queues", "durability", "d", "process"); q["name"] != "d" || q["durability"] != "process" {
		t.Fatalf("queues durability --json: %v", q)
	}
	if table := b.ok("queues", "durability", "d", "full"); !hasRow(table, "d", "no", "full", "0", "2") {
		t.Fatalf("queues durability table:\n%s", table)
	}
	b.ok("queues", "durability", "d", "process")
	after := b.okJSON("enqueue", "--queue", "d", "--kind", "k")["id"].(string)
	if got := b.okJSON("jobs", "get", after)["durability"]; got != "process" {
		t.Fatalf("job enqueued into a process queue: durability %v", got)
	}
	if got := b.okJSON("jobs", "get", before)["durability"]; got != "full" {
		t.Fatalf("job enqueued before the queue's change: durability %v", got)
	}
	if table := b.ok("queues", "list"); !hasRow(table, "d", "no", "process", "0", "3") {
		t.Fatalf("queues list:\n%s", table)
	}
	b.refused([]refusal{
		{[]string{"enqueue", "--kind", "k", "--durability", "disk"}, 1, "field durability"},
		{[]string{"queues", "durability", "d", "disk"}, 1, "field durability"},
		{[]string{"queues", "durability", "d"}, 2, "want 2 argument"},
	})
}

func TestCLIBadInput(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.refused([]refusal{
		{[]string{"enqueue", "--queue", "bad name", "--kind", "k"}, 1, "field queue"},
		{[]string{"schedules", "put", "s", "--kind", "k"}, 1, "field cron"},
		{[]string{"schedules", "put", "s", "--cron", "often", "--kind", "k"}, 1, "field cron"},
		{[]string{"schedules", "put", "s", "--cron", "@daily", "--every", "1m", "--kind", "k"}, 1, "field every_ms"},
		{[]string{"schedules", "put", "s", "--every", "10ms", "--kind", "k"}, 1, "field every_ms"},
		{[]string{"schedules", "put", "s", "--cron", "@daily", "--timezone", "Mars/Olympus", "--kind", "k"}, 1, "field timezone"},
		{[]string{"schedules", "put", "s", "--cron", "@daily", "--misfire", "sometimes", "--kind", "k"}, 1, "field misfire"},
		{[]string{"schedules", "put", "s", "--cron", "@daily"}, 1, "field job.kind"},
		{[]string{"schedules", "put", "s", "--cron", "@daily", "--kind", "k", "--payload", "{not json"}, 1, "not valid JSON"},
		{[]string{"schedules", "put", "--cron", "@daily", "--kind", "k"}, 2, "want 1 argument"},
		{[]string{"schedules", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"schedules", "trigger", "nosuch"}, 1, "not_found"},
		{[]string{"enqueue", "--kind", "k", "--payload", "{not json"}, 1, "not valid JSON"},
		{[]string{"enqueue", "--kind", "k", "extra"}, 2, "want 0 argument"},
		{[]string{"jobs", "frobnicate"}, 2, "unknown subcommand"},
		{[]string{"fetch"}, 2, "--queue is required"},
		{[]string{"queues", "retry", "q"}, 2, "--state is required"},
		{[]string{"ack", "nosuchjob", "--token", "3"}, 1, "not_found"},
	})
	if qs := b.okJSON("queues", "list")["queues"].([]any); len(qs) != 0 {
		t.Fatalf("bad input created queues: %v", qs)
	}
}

// hasRow reports whether some line of table has fields starting with
// want, in order.
func hasRow(table string, want ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < len(want) {
			continue
		}
		match := true
		for i, w := range want {
			match = match && f[i] == w
		}
		if match {
			return true
		}
	}
	return false
}

func formatInt(f float64) string { return strconv.FormatInt(int64(f), 10) }

// TestCLIShowIsGet checks that "show", which help texts of other tools
// use, reaches each get command rather than an unknown-subcommand error.
func TestCLIShowIsGet(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	id := b.okJSON("enqueue", "--queue", "emails", "--kind", "welcome")["id"].(string)
	if j := b.okJSON("jobs", "show", id); j["id"] != id {
		t.Fatalf("jobs show: %v", j)
	}
	if q := b.okJSON("queues", "show", "emails"); q["name"] != "emails" {
		t.Fatalf("queues show: %v", q)
	}
	b.ok("consumer-groups", "create", "emails", "billing")
	if g := b.okJSON("consumer-groups", "show", "emails", "billing"); g["name"] != "billing" {
		t.Fatalf("consumer-groups show: %v", g)
	}
	b.ok("schedules", "put", "digest", "--cron", "*/5 * * * *", "--queue", "reports", "--kind", "digest")
	if s := b.okJSON("schedules", "show", "digest"); s["name"] != "digest" {
		t.Fatalf("schedules show: %v", s)
	}
}
