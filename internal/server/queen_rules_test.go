package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

// The secrets of a token of each role, for the checks of what Queen's
// calls may configure.
const (
	queenAdmin    = "queen-admin-secret-0123456789"
	queenProducer = "queen-producer-secret-0123456789"
	queenWorker   = "queen-worker-secret-0123456789"
	queenReader   = "queen-reader-secret-0123456789"
)

// queenWithRoles turns Queen's API and auth on, with a token of each role.
func queenWithRoles(cfg *config.Config) {
	cfg.QueenCompat, cfg.Auth = true, true
	cfg.AuthTokens = config.Secret("ops admin * " + queenAdmin + "\nfeed producer * " + queenProducer +
		"\nhands worker * " + queenWorker + "\nview read-only * " + queenReader)
}

// queueConfig returns the limits and settings of a queue as the native
// API shows them (nil for none), and whether the queue exists.
func (b *bundle) queueConfig(token, name string) (limits, settings obj, exists bool) {
	b.t.Helper()
	status, body := b.callAs(token, "GET", "/v1/queues/"+name, "")
	if status == http.StatusNotFound {
		return nil, nil, false
	}
	var q obj
	if status != http.StatusOK || json.Unmarshal(body, &q) != nil {
		b.t.Fatalf("GET /v1/queues/%s: %d %s", name, status, body)
	}
	limits, _ = q["limits"].(obj)
	settings, _ = q["settings"].(obj)
	return limits, settings, true
}

// queueNamesAs lists the names of the queues the server knows.
func (b *bundle) queueNamesAs(token string) []string {
	b.t.Helper()
	status, body := b.callAs(token, "GET", "/v1/queues", "")
	var out struct {
		Queues []struct{ Name string } `json:"queues"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil {
		b.t.Fatalf("GET /v1/queues: %d %s", status, body)
	}
	names := make([]string, len(out.Queues))
	for i, q := range out.Queues {
		names[i] = q.Name
	}
	return names
}

// wantQueenError fails unless an answer is an error in Queen's shape with
// status, code and field.
func wantQueenError(t *testing.T, what string, status int, out any, wantStatus int, code, field string) {
	t.Helper()
	e, _ := out.(obj)
	if status != wantStatus || e["code"] != code || e["field"] != nilIfEmpty(field) || e["error"] == "" {
		t.Fatalf("%s: %d %v, want %d %s naming %q", what, status, out, wantStatus, code, field)
	}
}

// queenItems is a push body of one message per queue.
func queenItems(queues ...string) obj {
	items := make([]obj, len(queues))
	for i, q := range queues {
		items[i] = obj{"queue": q, "payload": i}
	}
	return obj{"items": items}
}

// A pop never configures a queue. A worker token, which may neither
// configure a queue nor create a consumer group, pops a queue as it is;
// its pop naming a group that does not exist is refused as the native
// route that creates groups refuses it, and changes nothing.
func TestQueenPopNeverConfiguresAQueue(t *testing.T) {
	t.Parallel()
	onBothStores(t, testQueenPopNeverConfigures, queenWithRoles)
}

func testQueenPopNeverConfigures(t *testing.T, b *bundle) {
	if status, body := b.callAs(queenAdmin, "POST", "/v1/jobs", `{"queue":"orders","kind":"k","payload":1}`); status != http.StatusCreated {
		t.Fatalf("native enqueue: %d %s", status, body)
	}
	unconfigured := func(when string) {
		t.Helper()
		if limits, settings, _ := b.queueConfig(queenAdmin, "orders"); limits != nil || settings != nil {
			t.Fatalf("%s: orders has limits %v and settings %v, want none", when, limits, settings)
		}
	}
	status, out := b.queenCall(queenWorker, "GET", "/api/v1/pop/queue/orders?consumerGroup=reporting", nil)
	wantQueenError(t, "a worker's pop that would create its group", status, out, http.StatusForbidden, "forbidden", "consumerGroup")
	if msg := out.(obj)["error"].(string); !strings.Contains(msg, "may not call PUT /v1/queues/orders/consumer-groups/reporting") {
		t.Fatalf("the refusal %q does not name the native route it needs", msg)
	}
	unconfigured("after the refused pop")
	if status, body := b.callAs(queenAdmin, "GET", "/v1/queues/orders/consumer-groups/reporting", ""); status != http.StatusNotFound {
		t.Fatalf("the refused pop left consumer group reporting: %d %s", status, body)
	}
	status, out = b.queenCall(queenWorker, "GET", "/api/v1/pop/queue/ghost?consumerGroup=reporting", nil)
	wantQueenError(t, "a worker's pop of a group of an unknown queue", status, out, http.StatusForbidden, "forbidden", "consumerGroup")
	if _, _, exists := b.queueConfig(queenAdmin, "ghost"); exists {
		t.Fatal("the refused pop created queue ghost")
	}
	for _, token := range []string{queenProducer, queenReader} {
		if status, out := b.queenCall(token, "GET", "/api/v1/pop/queue/orders", nil); status != http.StatusForbidden {
			t.Fatalf("a pop with a token that may not work: %d %v, want 403", status, out)
		}
	}

	// In queue mode the worker pops the queue as it is.
	status, out = b.queenCall(queenWorker, "GET", "/api/v1/pop/queue/orders", nil)
	if status != http.StatusOK || len(objs(out.(obj)["messages"])) != 1 {
		t.Fatalf("a worker's pop in queue mode: %d %v", status, out)
	}
	unconfigured("after a worker's pop in queue mode")
	// Once a token that may has made the group, the worker pops it.
	if status, body := b.callAs(queenAdmin, "PUT", "/v1/queues/orders/consumer-groups/reporting", "{}"); status != http.StatusCreated {
		t.Fatalf("create the group: %d %s", status, body)
	}
	status, out = b.queenCall(queenWorker, "GET", "/api/v1/pop/queue/orders?consumerGroup=reporting", nil)
	if status != http.StatusOK || len(objs(out.(obj)["messages"])) != 1 {
		t.Fatalf("a worker's pop of an existing group: %d %v", status, out)
	}
	unconfigured("after a worker's pop of a group")
	// An admin's pop creates its group, and leaves the queue as it is.
	status, out = b.queenCall(queenAdmin, "GET", "/api/v1/pop/queue/orders?consumerGroup=audit", nil)
	if status != http.StatusOK || len(objs(out.(obj)["messages"])) != 1 {
		t.Fatalf("an admin's pop that creates its group: %d %v", status, out)
	}
	unconfigured("after an admin's pop that created a group")

	// A pop in queue mode of a queue that does not exist creates nothing;
	// an admin's pop that creates its group creates the queue as a push
	// would.
	if status, out := b.queenCall(queenWorker, "GET", "/api/v1/pop/queue/later", nil); status != http.StatusNoContent {
		t.Fatalf("a pop of an unknown queue in queue mode: %d %v, want 204", status, out)
	}
	if _, _, exists := b.queueConfig(queenAdmin, "later"); exists {
		t.Fatal("a pop in queue mode created queue later")
	}
	if status, out := b.queenCall(queenAdmin, "GET", "/api/v1/pop/queue/later?consumerGroup=g", nil); status != http.StatusNoContent {
		t.Fatalf("an admin's pop creating a group of an unknown queue: %d %v, want 204", status, out)
	}
	limits, settings, _ := b.queueConfig(queenAdmin, "later")
	if limits["ordered"] != true || settings["default_lease_ms"] != 300000.0 {
		t.Fatalf("the queue an admin's pop created: limits %v, settings %v; want it as a push creates it", limits, settings)
	}
}

// A push configures only the queues it creates, and only with a token
// that may configure queues; a queue that exists keeps its own
// configuration.
func TestQueenPushConfiguresOnlyTheQueuesItCreates(t *testing.T) {
	t.Parallel()
	onBothStores(t, testQueenPushConfigures, queenWithRoles)
}

func testQueenPushConfigures(t *testing.T, b *bundle) {
	if status, body := b.callAs(queenAdmin, "POST", "/v1/jobs", `{"queue":"emails","kind":"k","payload":1}`); status != http.StatusCreated {
		t.Fatalf("native enqueue: %d %s", status, body)
	}
	for _, token := range []string{queenProducer, queenAdmin} {
		if status, out := b.queenCall(token, "POST", "/api/v1/push", queenItems("emails")); status != http.StatusCreated {
			t.Fatalf("push into an existing queue: %d %v", status, out)
		}
	}
	if limits, settings, _ := b.queueConfig(queenAdmin, "emails"); limits != nil || settings != nil {
		t.Fatalf("pushes made the native queue emails %v with settings %v, want it as it was", limits, settings)
	}
	if n := b.countsAs(queenAdmin, "emails")["available"]; n != 3 {
		t.Fatalf("emails holds %d available jobs, want 3", n)
	}

	status, out := b.queenCall(queenProducer, "POST", "/api/v1/push", queenItems("emails", "fresh"))
	wantQueenError(t, "a producer's push that would create a queue", status, out, http.StatusForbidden, "forbidden", "items[1].queue")
	if msg := out.(obj)["error"].(string); !strings.Contains(msg, "may not call PUT /v1/queues/fresh/limits") {
		t.Fatalf("the refusal %q does not name the native route it needs", msg)
	}
	if _, _, exists := b.queueConfig(queenAdmin, "fresh"); exists {
		t.Fatal("the refused push created queue fresh")
	}
	if n := b.countsAs(queenAdmin, "emails")["available"]; n != 3 {
		t.Fatalf("the refused push stored a job: emails holds %d available jobs, want 3", n)
	}
	for _, token := range []string{queenWorker, queenReader} {
		if status, out := b.queenCall(token, "POST", "/api/v1/push", queenItems("emails")); status != http.StatusForbidden {
			t.Fatalf("a push with a token that may not enqueue: %d %v, want 403", status, out)
		}
	}

	if status, out := b.queenCall(queenAdmin, "POST", "/api/v1/push", queenItems("fresh", "fresh")); status != http.StatusCreated {
		t.Fatalf("an admin's push that creates a queue: %d %v", status, out)
	}
	limits, settings, _ := b.queueConfig(queenAdmin, "fresh")
	if limits["ordered"] != true || settings["default_lease_ms"] != 300000.0 || settings["default_max_attempts"] != 4.0 {
		t.Fatalf("a queue a push created: limits %v, settings %v; want ordered with Queen's lease and attempts", limits, settings)
	}
}

// countsAs returns the per-state counts of a queue, read with token.
func (b *bundle) countsAs(token, queue string) map[string]int {
	b.t.Helper()
	status, body := b.callAs(token, "GET", "/v1/queues/"+queue, "")
	var q struct{ Counts map[string]int }
	if status != http.StatusOK || json.Unmarshal(body, &q) != nil {
		b.t.Fatalf("GET /v1/queues/%s: %d %s", queue, status, body)
	}
	return q.Counts
}

// A refused push or transaction creates no queue, configures none and
// stores no job, whatever refuses it; a refused transaction reports
// nothing as done.
func TestQueenRefusedCallsLeaveNoQueue(t *testing.T) {
	t.Parallel()
	onBothStores(t, testQueenRefusedCalls, queenOn, func(cfg *config.Config) {
		cfg.MaxBatch, cfg.MaxPayloadBytes = 20, 1000
	})
}

func testQueenRefusedCalls(t *testing.T, b *bundle) {
	b.enqueue(obj{"queue": "emails", "kind": "k"})
	before := b.queueNamesAs("")
	var fresh []string
	for i := range 10 {
		fresh = append(fresh, fmt.Sprintf("fresh-%d", i))
	}
	overBatch := make([]string, 21)
	for i := range overBatch {
		overBatch[i] = fmt.Sprintf("many-%d", i)
	}
	bigPayload := queenItems("big-a", "big-b")
	bigPayload["items"].([]obj)[1]["payload"] = strings.Repeat("x", 2000)
	for _, c := range []struct {
		what   string
		body   obj
		status int
		code   string
		field  string
	}{
		{"a bad item after a good one", obj{"items": []obj{{"queue": "emails", "payload": 1}, {"queue": ""}}}, 400, "invalid_argument", "items[1].queue"},
		{"new queues and a bad item", queenItems(append(fresh, "bad queue")...), 400, "invalid_argument", "items[10].queue"},
		{"more items than the server's batch", queenItems(overBatch...), 400, "batch_too_large", "items"},
		{"a payload over the server's limit", bigPayload, 413, "payload_too_large", "items[1].payload"},
	} {
		status, out := b.queenCall("", "POST", "/api/v1/push", c.body)
		wantQueenError(t, c.what, status, out, c.status, c.code, c.field)
		if after := b.queueNamesAs(""); !slices.Equal(after, before) {
			t.Fatalf("%s: the refused push left queues %v, want %v", c.what, after, before)
		}
		if limits, settings, _ := b.queueConfig("", "emails"); limits != nil || settings != nil {
			t.Fatalf("%s: the refused push made emails %v with settings %v", c.what, limits, settings)
		}
	}
	if n := b.counts("emails")["available"]; n != 1 {
		t.Fatalf("emails holds %d available jobs after the refused pushes, want 1", n)
	}

	// A transaction whose ack's lease is gone.
	b.queenMust(201, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "src", "payload": 1, "transactionId": "m"}}})
	m := objs(b.queenMust(200, "GET", "/api/v1/pop/queue/src", nil).(obj)["messages"])[0]
	ack := obj{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
	if r := objs(b.queenMust(200, "POST", "/api/v1/ack", ack))[0]; r["success"] != true {
		t.Fatalf("ack: %v", r)
	}
	before = b.queueNamesAs("")
	ack["type"] = "ack"
	res := b.queenMust(200, "POST", "/api/v1/transaction", obj{"operations": []obj{
		{"type": "push", "items": []obj{{"queue": "tx-new", "payload": 1}}}, ack}}).(obj)
	if res["success"] != false {
		t.Fatalf("a transaction with a lease that is gone: %v, want refused", res)
	}
	for _, r := range objs(res["results"]) {
		if r["success"] == true {
			t.Fatalf("the refused transaction reports %v as done", r)
		}
	}
	if after := b.queueNamesAs(""); !slices.Equal(after, before) {
		t.Fatalf("the refused transaction left queues %v, want %v", after, before)
	}
}

// A consumer group deleted behind Queen's back is created again by the
// next pop that names it, from where that pop subscribes.
func TestQueenPopCreatesADeletedGroupAgain(t *testing.T) {
	t.Parallel()
	onBothStores(t, testQueenPopAfterDelete, queenOn)
}

func testQueenPopAfterDelete(t *testing.T, b *bundle) {
	b.queenMust(201, "POST", "/api/v1/push", obj{"items": []obj{{"queue": "news", "payload": 1, "transactionId": "m1"}}})
	pop := func() []obj {
		t.Helper()
		status, out := b.queenCall("", "GET", "/api/v1/pop/queue/news?consumerGroup=g", nil)
		if status != http.StatusOK {
			t.Fatalf("pop of group g: %d %v", status, out)
		}
		return objs(out.(obj)["messages"])
	}
	if got := pop(); len(got) != 1 || got[0]["transactionId"] != "m1" {
		t.Fatalf("first pop: %v", got)
	}
	b.must(204, "DELETE", "/v1/queues/news/consumer-groups/g", nil)
	if got := pop(); len(got) != 1 || got[0]["transactionId"] != "m1" {
		t.Fatalf("pop after the group was deleted: %v, want m1 again from the beginning", got)
	}
}

// A Queen path in a form other than canonical gets a JSON 404, not the
// router's redirect, and changes nothing.
func TestQueenNonCanonicalPathsAreNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, queenOn)
	for _, p := range []string{"/api/v1//push", "/api/v1/x/../push", "/api/v1/./push"} {
		status, body := b.callAs("", "POST", p, `{"items":[{"queue":"q","payload":1}]}`)
		var out obj
		if status != http.StatusNotFound || json.Unmarshal(body, &out) != nil || out["code"] != "not_found" {
			t.Fatalf("POST %s: %d %s, want a JSON 404", p, status, body)
		}
	}
	if _, _, exists := b.queueConfig("", "q"); exists {
		t.Fatal("a push on a path not in canonical form created queue q")
	}
}

// Queen's batch calls take the server's bound on a batch.
func TestQueenHonoursTheServersMaxBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, queenOn, func(cfg *config.Config) { cfg.MaxBatch = 3 })
	pushed := objs(b.queenMust(201, "POST", "/api/v1/push", queenItems("q")))
	acks := func(n int) obj {
		list := make([]obj, n)
		for i := range list {
			list[i] = obj{"transactionId": fmt.Sprintf("t%d", i), "partitionId": pushed[0]["partition_id"]}
		}
		return obj{"acknowledgments": list}
	}
	if status, out := b.queenCall("", "POST", "/api/v1/ack/batch", acks(3)); status != http.StatusOK {
		t.Fatalf("an ack batch of 3: %d %v", status, out)
	}
	status, out := b.queenCall("", "POST", "/api/v1/ack/batch", acks(4))
	wantQueenError(t, "an ack batch over the server's batch", status, out, http.StatusBadRequest, "batch_too_large", "acknowledgments")
}
