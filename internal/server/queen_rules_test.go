package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/spoolq/spool/internal/config"
)

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
			list[i] = obj{"transactionId": fmt.Sprintf("t%d", i), "partitionId": pushed[0]["partitionId"]}
		}
		return obj{"acknowledgments": list}
	}
	if status, out := b.queenCall("", "POST", "/api/v1/ack/batch", acks(3)); status != http.StatusOK {
		t.Fatalf("an ack batch of 3: %d %v", status, out)
	}
	status, out := b.queenCall("", "POST", "/api/v1/ack/batch", acks(4))
	wantQueenError(t, "an ack batch over the server's batch", status, out, http.StatusBadRequest, "batch_too_large", "acknowledgments")
}
