package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// queenCall sends a request in Queen's wire format and decodes the answer,
// whatever JSON it is (nil for an empty body).
func (b *bundle) queenCall(token, method, path string, body any) (int, any) {
	b.t.Helper()
	raw := ""
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		raw = string(data)
	}
	status, data := b.callAs(token, method, path, raw)
	if len(bytes.TrimSpace(data)) == 0 {
		return status, nil
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		b.t.Fatalf("%s %s: answer is not JSON: %q", method, path, data)
	}
	return status, out
}

// queenMust is queenCall that fails the test unless the status is want.
func (b *bundle) queenMust(want int, method, path string, body any) any {
	b.t.Helper()
	status, out := b.queenCall("", method, path, body)
	if status != want {
		b.t.Fatalf("%s %s: status %d, want %d; body %v", method, path, status, want, out)
	}
	return out
}

func queenOn(cfg *config.Config) { cfg.QueenCompat = true }

// Without --queen-compat, Queen's routes are Spool's unknown routes.
func TestQueenIsOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.call("POST", "/api/v1/push", obj{"items": []obj{{"queue": "q", "payload": 1}}})
	if status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Fatalf("push with Queen off: %d %v, want 404 not_found", status, out)
	}
	if status, out := b.call("GET", "/v1/queues/q", nil); status != http.StatusNotFound {
		t.Fatalf("queue q after the refused push: %d %v, want none", status, out)
	}
}

// Queen's calls map onto ordered queues, consumer groups, dead letters and
// transactions, the same on both stores.
func TestQueenPartitionsGroupsAndTransactions(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			testQueenFlow(t, setup(t, append([]func(*config.Config){queenOn}, change...)...))
		})
	}
}

func testQueenFlow(t *testing.T, b *bundle) {
	out := b.queenMust(200, "POST", "/api/v1/configure", obj{"queue": "orders", "options": obj{"leaseTime": 20, "retryLimit": 1}})
	if out.(obj)["configured"] != true {
		t.Fatalf("configure: %v", out)
	}
	q := b.must(200, "GET", "/v1/queues/orders", nil)
	if limits := q["limits"].(obj); limits["ordered"] != true {
		t.Fatalf("configured queue's limits: %v, want ordered", limits)
	}
	if s := q["settings"].(obj); s["default_lease_ms"] != 20000.0 || s["default_max_attempts"] != 2.0 {
		t.Fatalf("configured queue's settings: %v, want a 20 s lease and 2 attempts", s)
	}

	var items []obj
	for _, p := range []string{"a", "b"} {
		for n := range 3 {
			items = append(items, obj{"queue": "orders", "partition": p, "payload": obj{"p": p, "n": n}, "transactionId": p + string(rune('0'+n))})
		}
	}
	pushed := objs(b.queenMust(201, "POST", "/api/v1/push", obj{"items": items}))
	for i, r := range pushed {
		if r["status"] != "queued" {
			t.Fatalf("push item %d: %v", i, r)
		}
	}
	again := objs(b.queenMust(201, "POST", "/api/v1/push", obj{"items": items[:1]}))
	if again[0]["status"] != "duplicate" {
		t.Fatalf("the same partition and transactionId again: %v, want duplicate", again[0])
	}

	pop := func(query string) []obj {
		t.Helper()
		status, out := b.queenCall("", "GET", "/api/v1/pop/queue/orders?"+query, nil)
		if status == http.StatusNoContent {
			return nil
		}
		if status != http.StatusOK {
			t.Fatalf("pop %s: %d %v", query, status, out)
		}
		return objs(out.(obj)["messages"])
	}
	ack := func(m obj, status, group string) obj {
		t.Helper()
		body := obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": status, "consumerGroup": group, "error": "it failed"}
		return objs(b.queenMust(200, "POST", "/api/v1/ack", body))[0]
	}

	// Queue mode: a pop takes a run of one partition, in push order.
	txIDs := func(ms []obj) string {
		var ids []string
		for _, m := range ms {
			ids = append(ids, m["transactionId"].(string))
		}
		return strings.Join(ids, " ")
	}
	first, second := pop("batch=10"), pop("batch=10")
	if len(first) == 0 || first[0]["consumerGroup"] != "__QUEUE_MODE__" {
		t.Fatalf("first pop: %v, want a partition's messages in queue mode", first)
	}
	if got := txIDs(first) + " / " + txIDs(second); got != "a0 a1 a2 / b0 b1 b2" && got != "b0 b1 b2 / a0 a1 a2" {
		t.Fatalf("two pops: %s, want each partition's messages in push order, one partition a pop", got)
	}
	if more := pop("batch=10"); len(more) != 0 {
		t.Fatalf("a pop while both partitions are leased got %v", more)
	}
	if r := ack(first[0], "completed", ""); r["success"] != true {
		t.Fatalf("ack: %v", r)
	}
	if r := ack(first[0], "completed", ""); r["success"] != false || r["error"] != "Invalid or expired lease" {
		t.Fatalf("the same ack again: %v, want refused for its lease", r)
	}
	// A failure with a retry left sends the message and the rest of its
	// pop back; the next pop takes them again, the message first.
	if r := ack(first[1], "failed", ""); r["success"] != true || r["dlq"] != false {
		t.Fatalf("nack with a retry left: %v", r)
	}
	if r := ack(first[2], "completed", ""); r["success"] != false {
		t.Fatalf("ack of a message its pop's failure sent back: %v, want refused", r)
	}
	var next []obj
	b.waitFor("the failed message back", 5e9, func() bool {
		next = pop("batch=10")
		return len(next) > 0
	})
	if txIDs(next) != txIDs(first[1:]) || next[0]["retryCount"] != 1.0 || next[1]["retryCount"] != 0.0 {
		t.Fatalf("after the failure: %v, want the failed message %v again first, then the rest of its pop", next, first[1]["transactionId"])
	}

	// A consumer group gets every message, from the start, on its own.
	g1 := pop("batch=10&consumerGroup=g1")
	if len(g1) < 2 || g1[0]["consumerGroup"] != "g1" || g1[1]["partition"] != g1[0]["partition"] {
		t.Fatalf("g1's first pop: %v, want a run of one partition", g1)
	}
	if r := ack(g1[0], "dlq", "g1"); r["success"] != true || r["dlq"] != true {
		t.Fatalf("nack to the dead letters: %v", r)
	}
	dlq := b.queenMust(200, "GET", "/api/v1/dlq?queue=orders&consumerGroup=g1", nil).(obj)
	dead := objs(dlq["messages"])
	if len(dead) != 1 || dead[0]["transactionId"] != g1[0]["transactionId"] || dead[0]["errorMessage"] != "it failed" {
		t.Fatalf("g1's dead letters: %v", dlq)
	}
	if n := b.counts("orders")["dead"]; n != 0 {
		t.Fatalf("the queue itself has %d dead jobs; a group's death is its own", n)
	}
	// The nack sent the rest of the pop back: its ack is refused, and the
	// next pop gets it again.
	if r := ack(g1[1], "completed", "g1"); r["success"] != false {
		t.Fatalf("ack of a message a nack sent back: %v, want refused", r)
	}
	var back obj // the first message of g1[1]'s partition in the next pop
	for _, m := range pop("batch=10&consumerGroup=g1&partitions=2") {
		if back == nil && m["partition"] == g1[1]["partition"] {
			back = m
		}
	}
	if back == nil || back["transactionId"] != g1[1]["transactionId"] {
		t.Fatalf("g1's pop after the nack: %v first of its partition, want %v", back, g1[1]["transactionId"])
	}
	againG1 := []obj{back}
	// A failure with retries left delivers the message again, before
	// the rest of its partition.
	if r := ack(againG1[0], "failed", "g1"); r["success"] != true || r["dlq"] != false {
		t.Fatalf("nack with a retry left: %v", r)
	}
	var retried []obj
	b.waitFor("the failed message back", 5e9, func() bool {
		retried = append(retried, pop("batch=10&consumerGroup=g1")...)
		for _, m := range retried {
			if m["transactionId"] == againG1[0]["transactionId"] {
				return true
			}
		}
		return false
	})

	ext := objs(b.queenMust(200, "POST", "/api/v1/lease/"+next[0]["leaseId"].(string)+"/extend", nil))
	if ext[0]["success"] != true || ext[0]["newExpiresAt"] == nil {
		t.Fatalf("extend: %v", ext)
	}

	// A transaction: ack and push together; with a stale lease, nothing.
	op := func(m obj) obj {
		return obj{"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
	}
	push := func(tx string) obj {
		return obj{"type": "push", "items": []obj{{"queue": "outbox", "partition": "mail", "payload": obj{"tx": tx}, "transactionId": tx}}}
	}
	res := b.queenMust(200, "POST", "/api/v1/transaction", obj{"operations": []obj{op(next[0]), push("t1")}}).(obj)
	if res["success"] != true {
		t.Fatalf("transaction: %v", res)
	}
	res = b.queenMust(200, "POST", "/api/v1/transaction", obj{"operations": []obj{op(next[0]), push("t2")}}).(obj)
	if res["success"] != false {
		t.Fatalf("transaction with a stale lease: %v, want refused", res)
	}
	if n := b.counts("outbox")["available"]; n != 1 {
		t.Fatalf("outbox holds %d jobs, want the committed push only", n)
	}

	groups := objs(b.queenMust(200, "GET", "/api/v1/consumer-groups", nil))
	if len(groups) != 1 || groups[0]["name"] != "g1" || groups[0]["queueName"] != "orders" {
		t.Fatalf("consumer groups: %v", groups)
	}
	seek := b.queenMust(200, "POST", "/api/v1/consumer-groups/g1/queues/orders/seek", obj{"toEnd": true}).(obj)
	if seek["success"] != true {
		t.Fatalf("seek: %v", seek)
	}
	if got := pop("batch=10&consumerGroup=g1"); len(got) != 0 {
		t.Fatalf("after a seek to the end g1 got %v", got)
	}

	// partitions=N: runs of up to N partitions share the batch.
	var multi []obj
	for _, p := range []string{"x", "y", "z"} {
		for n := range 2 {
			multi = append(multi, obj{"queue": "multi", "partition": p, "payload": obj{"p": p, "n": n}, "transactionId": p + string(rune('0'+n))})
		}
	}
	b.queenMust(201, "POST", "/api/v1/push", obj{"items": multi})
	if status, out := b.queenCall("", "GET", "/api/v1/pop/queue/multi?partitions=0", nil); status != http.StatusBadRequest {
		t.Fatalf("pop with partitions=0: %d %v, want 400", status, out)
	}
	status, out := b.queenCall("", "GET", "/api/v1/pop/queue/multi?batch=10&partitions=2", nil)
	if status != http.StatusOK {
		t.Fatalf("pop of 2 partitions: %d %v", status, out)
	}
	got := objs(out.(obj)["messages"])
	parts := map[string][]string{}
	for _, m := range got {
		parts[m["partition"].(string)] = append(parts[m["partition"].(string)], m["transactionId"].(string))
	}
	if len(got) != 4 || len(parts) != 2 {
		t.Fatalf("pop of 2 partitions: %v, want the 2 messages of each of 2 partitions", parts)
	}
	for p, ids := range parts {
		if strings.Join(ids, " ") != p+"0 "+p+"1" {
			t.Fatalf("pop of 2 partitions: partition %s gave %v, want its messages in push order", p, ids)
		}
	}
}

// A token limited to namespaces reaches, through Queen's routes, only the
// queues in them, as through Spool's own.
func TestQueenKeepsToTheTokensNamespaces(t *testing.T) {
	t.Parallel()
	const admin, team = "admin-secret-0123456789", "team-secret-0123456789"
	b := setup(t, queenOn, func(cfg *config.Config) {
		cfg.Auth = true
		cfg.AuthTokens = config.Secret("ops admin * " + admin + "\nteam worker team- " + team)
	})
	push := func(token, queue string) (int, any) {
		return b.queenCall(token, "POST", "/api/v1/push", obj{"items": []obj{{"queue": queue, "payload": 1, "transactionId": "x"}}})
	}
	if status, _ := push("", "team-q"); status != http.StatusUnauthorized {
		t.Fatalf("push without a token: %d, want 401", status)
	}
	if status, _ := push(team, "team-q"); status != http.StatusForbidden {
		t.Fatalf("push with a worker token: %d, want 403 (a worker may not enqueue)", status)
	}
	if status, out := push(admin, "other-q"); status != http.StatusCreated {
		t.Fatalf("admin push: %d %v", status, out)
	}
	if status, out := push(admin, "team-q"); status != http.StatusCreated {
		t.Fatalf("admin push: %d %v", status, out)
	}
	if status, _ := b.queenCall(team, "GET", "/api/v1/pop/queue/other-q", nil); status != http.StatusForbidden {
		t.Fatalf("pop of another namespace's queue: %d, want 403", status)
	}
	status, out := b.queenCall(admin, "GET", "/api/v1/pop/queue/other-q", nil)
	if status != http.StatusOK {
		t.Fatalf("admin pop: %d %v", status, out)
	}
	other := objs(out.(obj)["messages"])[0]
	status, out = b.queenCall(team, "GET", "/api/v1/pop/queue/team-q", nil)
	if status != http.StatusOK {
		t.Fatalf("team pop: %d %v", status, out)
	}
	mine := objs(out.(obj)["messages"])[0]
	// The other queue's lease under the team's own partition: refused,
	// and the other queue's job stays leased.
	body := obj{"transactionId": other["transactionId"], "partitionId": mine["partitionId"], "leaseId": other["leaseId"]}
	status, out = b.queenCall(team, "POST", "/api/v1/ack", body)
	if status != http.StatusOK || objs(out)[0]["success"] != false {
		t.Fatalf("ack of another namespace's job: %d %v, want refused", status, out)
	}
	body["partitionId"] = other["partitionId"]
	if status, _ = b.queenCall(team, "POST", "/api/v1/ack", body); status != http.StatusForbidden {
		t.Fatalf("ack naming another namespace's partition: %d, want 403", status)
	}
	status, out = b.queenCall(team, "POST", "/api/v1/lease/"+url.PathEscape(other["leaseId"].(string))+"/extend", nil)
	if status != http.StatusOK || objs(out)[0]["success"] != false {
		t.Fatalf("extend of another namespace's lease: %d %v, want refused", status, out)
	}
	status, out = b.queenCall(admin, "GET", "/v1/queues/other-q", nil)
	if counts := out.(obj)["counts"].(obj); status != 200 || counts["active"] != 1.0 {
		t.Fatalf("other-q after the refused calls: %d %v, want its job still active", status, out)
	}
}

// Bad input gets 400 naming the field, in Queen's error shape, and changes
// nothing.
func TestQueenRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, queenOn)
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/api/v1/push", obj{}, "items"},
		{"POST", "/api/v1/push", obj{"items": []obj{{"payload": 1}}}, "items[0].queue"},
		{"POST", "/api/v1/push", obj{"items": []obj{{"queue": "bad queue", "payload": 1}}}, "items[0].queue"},
		{"POST", "/api/v1/push", obj{"items": []obj{{"queue": "q", "payload": 1, "transactionId": strings.Repeat("é", 100)}}}, "items[0].transactionId"},
		{"POST", "/api/v1/push", obj{"items": "no"}, "items"},
		{"POST", "/api/v1/configure", obj{"queue": "q", "options": obj{"leaseTime": -1}}, "options.leaseTime"},
		{"POST", "/api/v1/configure", obj{"queue": "q", "options": obj{"retryLimit": 1.5}}, "options.retryLimit"},
		{"GET", "/api/v1/pop/queue/q?batch=0", nil, "batch"},
		{"GET", "/api/v1/pop/queue/q?wait=maybe", nil, "wait"},
		{"GET", "/api/v1/pop/queue/q?consumerGroup=bad%20group", nil, "consumerGroup"},
		{"GET", "/api/v1/pop?namespace=n", nil, "queue"},
		{"POST", "/api/v1/ack", obj{"partitionId": "x"}, "transactionId"},
		{"POST", "/api/v1/ack", obj{"transactionId": "t", "partitionId": "not-ours"}, "partitionId"},
		{"POST", "/api/v1/ack/batch", obj{"acknowledgments": []obj{{"transactionId": "t"}}}, "acknowledgments[0].partitionId"},
		{"POST", "/api/v1/transaction", obj{"operations": []obj{}}, "operations"},
		{"POST", "/api/v1/transaction", obj{"operations": []obj{{"type": "drop"}}}, "operations[0].type"},
		{"GET", "/api/v1/dlq", nil, "queue"},
		{"POST", "/api/v1/consumer-groups/g/queues/q/seek", obj{}, ""},
	} {
		status, out := b.queenCall("", c.method, c.path, c.body)
		answer, _ := out.(obj)
		if status != http.StatusBadRequest || answer["field"] != nilIfEmpty(c.field) || answer["error"] == "" {
			t.Errorf("%s %s %v: %d %v, want 400 naming %q", c.method, c.path, c.body, status, out, c.field)
		}
	}
	if status, out := b.call("GET", "/v1/queues/q", nil); status != http.StatusNotFound {
		t.Fatalf("queue q after the refused calls: %d %v, want none", status, out)
	}
}

// nilIfEmpty is what a decoded answer holds for a field left out when
// field is empty.
func nilIfEmpty(field string) any {
	if field == "" {
		return nil
	}
	return field
}
