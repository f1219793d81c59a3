package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spool jobs transact reads a transaction from a file or standard input,
// applies it all or nothing, and prints what each item became.
func TestCLITransact(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	for range 3 {
		b.ok("enqueue", "--queue", "tx", "--kind", "k")
	}
	jobs := b.okJSON("fetch", "--queue", "tx", "--max", "3")["jobs"].([]any)
	if len(jobs) != 3 {
		t.Fatalf("fetched %d jobs", len(jobs))
	}
	id := func(i int) string { return jobs[i].(map[string]any)["id"].(string) }
	token := func(i int) string {
		return formatInt(jobs[i].(map[string]any)["lease"].(map[string]any)["token"].(float64))
	}

	stale := fmt.Sprintf(`{"ack":[{"id":%q,"token":%s9}],"enqueue":[{"id":"follow-up","queue":"next","kind":"k"}]}`, id(0), token(0))
	code, _, errOut := b.runIn(strings.NewReader(stale), "jobs", "transact")
	if code != 1 || !strings.Contains(errOut, "field ack[0].token") {
		t.Fatalf("a stale token: exit %d %q, want exit 1 naming ack[0].token", code, errOut)
	}
	if code, _, errOut := b.run("jobs", "get", "follow-up"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("the job of a refused transaction: exit %d %q", code, errOut)
	}

	file := filepath.Join(t.TempDir(), "tx.json")
	body := fmt.Sprintf(`{"ack":[{"id":%q,"token":%s,"result":{"rows":3}}],
		"fail":[{"id":%q,"token":%s,"error":"bad row","no_retry":true}],
		"enqueue":[{"id":"follow-up","queue":"next","kind":"k","payload":{"from":%q},"backoff":{"type":"fixed","base_ms":500,"jitter":0}}]}`,
		id(0), token(0), id(1), token(1), id(0))
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	table := b.ok("jobs", "transact", "--file", file)
	for _, row := range [][]string{{"ack[0]", id(0), "completed"}, {"fail[0]", id(1), "dead"}, {"enqueue[0]", "follow-up", "available", "no"}} {
		if !hasRow(table, row...) {
			t.Fatalf("jobs transact printed no row %v:\n%s", row, table)
		}
	}
	if j := b.okJSON("jobs", "get", "follow-up"); j["queue"] != "next" || j["backoff"].(map[string]any)["base_ms"].(float64) != 500 {
		t.Fatalf("the enqueued job: %v", j)
	}

	again := fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"enqueue":[{"id":"follow-up","queue":"next","kind":"k"}]}`, id(2), token(2))
	code, out, errOut := b.runIn(strings.NewReader(again), "jobs", "transact", "--json")
	var res struct {
		Acked []struct{ ID, State string }
		Jobs  []struct {
			ID        string
			Duplicate bool
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Acked) != 1 || res.Acked[0].State != "completed" ||
		len(res.Jobs) != 1 || !res.Jobs[0].Duplicate {
		t.Fatalf("jobs transact --json: exit %d %s %s", code, out, errOut)
	}

	for _, bad := range []struct{ body, want string }{
		{`{"acks":[]}`, "unknown field"},
		{`{"enqueue":[{"kind":"k","backoff":{"type":"fixed"}}]}`, "enqueue[0].backoff"},
		{`{}`, "invalid_argument"},
		{`{"enqueue":[{"kind":"k"}]} {}`, "more than one JSON value"},
	} {
		if code, _, errOut := b.runIn(strings.NewReader(bad.body), "jobs", "transact"); code != 1 || !strings.Contains(errOut, bad.want) {
			t.Errorf("jobs transact of %s: exit %d %q, want exit 1 mentioning %q", bad.body, code, errOut, bad.want)
		}
	}
	if code, _, errOut := b.run("jobs", "transact", "--file", filepath.Join(t.TempDir(), "none.json")); code != 1 || !strings.Contains(errOut, "none.json") {
		t.Errorf("jobs transact of a missing file: exit %d %q", code, errOut)
	}
}
