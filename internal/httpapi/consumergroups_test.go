package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Consumer groups over the wire: created, each fed every job, fetched
// from by name, listed with their lag, moved, deleted; bad input is
// refused naming the field.
func TestConsumerGroupsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	mustStatus := func(rec interface{ Result() *http.Response }, want int, what string) {
		t.Helper()
		if got := rec.Result().StatusCode; got != want {
			t.Fatalf("%s: status %d, want %d", what, got, want)
		}
	}
	mustStatus(send(a, "POST", "/v1/jobs", `{"queue":"orders","kind":"k","payload":{"n":1}}`), http.StatusCreated, "enqueue before the groups")
	mustStatus(send(a, "PUT", "/v1/queues/orders/consumer-groups/billing", `{}`), http.StatusCreated, "create billing")
	mustStatus(send(a, "PUT", "/v1/queues/orders/consumer-groups/audit", `{"start":"new"}`), http.StatusCreated, "create audit")
	mustStatus(send(a, "PUT", "/v1/queues/orders/consumer-groups/billing", `{"start":"new"}`), http.StatusOK, "create billing again")
	mustStatus(send(a, "POST", "/v1/jobs", `{"queue":"orders","kind":"k","payload":{"n":2}}`), http.StatusCreated, "enqueue after the groups")

	type fetched struct {
		Jobs []struct {
			ID            string          `json:"id"`
			Queue         string          `json:"queue"`
			ConsumerGroup string          `json:"consumer_group"`
			Payload       json.RawMessage `json:"payload"`
			Lease         struct {
				Token int64 `json:"token"`
			} `json:"lease"`
		} `json:"jobs"`
	}
	fetch := func(group string) fetched {
		t.Helper()
		rec := send(a, "POST", "/v1/fetch", `{"queues":["orders"],"max":10,"consumer_group":"`+group+`"}`)
		mustStatus(rec, http.StatusOK, "fetch for "+group)
		var f fetched
		if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	billing := fetch("billing")
	if len(billing.Jobs) != 2 || billing.Jobs[0].Queue != "orders" || billing.Jobs[0].ConsumerGroup != "billing" ||
		!strings.HasSuffix(billing.Jobs[0].ID, "@billing") || string(billing.Jobs[1].Payload) != `{"n":2}` {
		t.Fatalf("billing fetched %+v", billing.Jobs)
	}
	if audit := fetch("audit"); len(audit.Jobs) != 1 || string(audit.Jobs[0].Payload) != `{"n":2}` {
		t.Fatalf("audit (new jobs only) fetched %+v", audit.Jobs)
	}
	j := billing.Jobs[0]
	if rec := send(a, "POST", "/v1/jobs/"+j.ID+"/ack", `{"token":`+jsonInt(j.Lease.Token)+`}`); rec.Code != http.StatusOK {
		t.Fatalf("ack a copy: %d %s", rec.Code, rec.Body)
	}

	if rec := send(a, "GET", "/v1/jobs?queue=orders&consumer_group=billing&state=active", ""); strings.Count(rec.Body.String(), `"consumer_group":"billing"`) != 1 {
		t.Fatalf("list billing's active jobs: %s", rec.Body)
	}
	var g consumerGroupJSON
	rec := send(a, "GET", "/v1/queues/orders/consumer-groups/billing", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &g); err != nil || g.Pending != 1 || g.Counts["completed"] != 1 || g.OldestPendingAt == nil {
		t.Fatalf("get billing: %s", rec.Body)
	}
	var list struct {
		ConsumerGroups []consumerGroupJSON `json:"consumer_groups"`
	}
	rec = send(a, "GET", "/v1/queues/orders/consumer-groups", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.ConsumerGroups) != 2 || list.ConsumerGroups[0].Name != "audit" {
		t.Fatalf("list: %s", rec.Body)
	}
	if rec := send(a, "GET", "/v1/queues", ""); strings.Contains(rec.Body.String(), "@") {
		t.Fatalf("the queue list shows a consumer group's lane: %s", rec.Body)
	}

	rec = send(a, "POST", "/v1/queues/orders/consumer-groups/billing/seek", `{"start":"beginning"}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &g); err != nil || g.Replayed == nil || *g.Replayed != 2 || g.Counts["available"] != 2 {
		t.Fatalf("seek to the beginning: %s", rec.Body)
	}
	if again := fetch("billing"); len(again.Jobs) != 2 {
		t.Fatalf("billing after the seek fetched %+v", again.Jobs)
	}

	for _, c := range []struct {
		method, path, body string
		status             int
		code               Code
		field              string
	}{
		{"PUT", "/v1/queues/orders/consumer-groups/x", `{"start":"middle"}`, 400, "invalid_argument", "start"},
		{"PUT", "/v1/queues/orders/consumer-groups/x", `{"start":"time"}`, 400, "invalid_argument", "from"},
		{"PUT", "/v1/queues/orders/consumer-groups/x", `{"from":"2026-01-01T00:00:00Z"}`, 400, "invalid_argument", "from"},
		{"PUT", "/v1/queues/orders/consumer-groups/x", `{"begin":1}`, 400, "invalid_json", "begin"},
		{"PUT", "/v1/queues/orders/consumer-groups/-x", `{}`, 400, "invalid_argument", "name"},
		{"POST", "/v1/fetch", `{"queues":["orders"],"consumer_group":"nobody"}`, 404, "not_found", "consumer_group"},
		{"POST", "/v1/fetch", `{"queues":["orders"],"consumer_group":"a@b"}`, 400, "invalid_argument", "consumer_group"},
		{"POST", "/v1/fetch", `{"queues":["orders"],"consumer_group":""}`, 400, "invalid_argument", "consumer_group"},
		{"POST", "/v1/queues/orders/consumer-groups/nobody/seek", `{}`, 404, "not_found", ""},
		{"GET", "/v1/jobs?consumer_group=billing", "", 400, "invalid_argument", "consumer_group"},
	} {
		wantErrorRec(t, c.method+" "+c.path+" "+c.body, send(a, c.method, c.path, c.body), c.status, c.code, c.field)
	}
	if rec := send(a, "GET", "/v1/queues/orders/consumer-groups", ""); strings.Contains(rec.Body.String(), `"x"`) {
		t.Fatalf("a refused create made a group: %s", rec.Body)
	}

	mustStatus(send(a, "DELETE", "/v1/queues/orders/consumer-groups/billing", ""), http.StatusNoContent, "delete billing")
	wantErrorRec(t, "get a deleted group", send(a, "GET", "/v1/queues/orders/consumer-groups/billing", ""), 404, "not_found", "")
	wantErrorRec(t, "fetch for a deleted group", send(a, "POST", "/v1/fetch", `{"queues":["orders"],"consumer_group":"billing"}`), 404, "not_found", "consumer_group")
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
