package server

import (
	"testing"
)

// A field refused inside a nested object or array, in any body the API
// reads (limits, enqueues, job templates, transactions, batches,
// consumer groups, fetches), is named by its full path: unknown,
// mistyped, repeated, inexactly cased or null. The refused requests
// change nothing.
func TestNestedFieldsAreNamedByTheirPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		method, path, body, code, field string
	}{
		{"PUT", "/v1/queues/q/limits", `{"rate":{"limit":1,"period_ms":1000,"x":1}}`, "invalid_json", "rate.x"},
		{"PUT", "/v1/queues/q/limits", `{"group_rate":{"limit":"1","period_ms":1000}}`, "invalid_json", "group_rate.limit"},
		{"PUT", "/v1/queues/q/limits", `{"rate":{"limit":1,"limit":2,"period_ms":1000}}`, "invalid_json", "rate.limit"},
		{"PUT", "/v1/queues/q/limits", `{"rate":{"Limit":1,"period_ms":1000}}`, "invalid_json", "rate.Limit"},
		{"PUT", "/v1/queues/q/limits", `{"rate":{"limit":null,"period_ms":1000}}`, "invalid_json", "rate.limit"},
		{"PUT", "/v1/queues/q/settings", `{"max_wait_ms":"1"}`, "invalid_json", "max_wait_ms"},
		{"POST", "/v1/jobs", `{"queue":"q","kind":"k","backoff":{"type":"fixed","x":1}}`, "invalid_json", "backoff.x"},
		{"POST", "/v1/jobs", `{"queue":"q","kind":"k","backoff":{"base_ms":"1"}}`, "invalid_json", "backoff.base_ms"},
		{"POST", "/v1/jobs", `{"queue":"q","kind":"k","tags":["a",1]}`, "invalid_json", "tags[1]"},
		{"POST", "/v1/jobs", `{"queue":"q","kind":"k","run_at":"soon"}`, "invalid_json", "run_at"},
		{"POST", "/v1/jobs/batch", `{"jobs":[{"queue":"q","kind":"k"},{"queue":"q","kind":"k","x":1}]}`, "invalid_json", "jobs[1].x"},
		{"POST", "/v1/jobs/batch", `{"jobs":[{"queue":"q","kind":"k"},{"queue":"q","kind":5}]}`, "invalid_json", "jobs[1].kind"},
		{"POST", "/v1/jobs/batch", `{"jobs":[{"queue":"q","kind":"k"},{"queue":"q","kind":"k","run_at":"soon"}]}`, "invalid_json", "jobs[1].run_at"},
		{"POST", "/v1/jobs/batch", `{"jobs":[{"queue":"q","kind":"k","backoff":{"jitter":0.1,"Jitter":0.2}}]}`, "invalid_json", "jobs[0].backoff.Jitter"},
		{"PUT", "/v1/schedules/s", `{"every_ms":60000,"job":{"queue":"q","kind":"k","backoff":{"x":1}}}`, "invalid_json", "job.backoff.x"},
		{"PUT", "/v1/schedules/s", `{"every_ms":60000,"job":{"queue":"q","kind":"k","tags":["a",1]}}`, "invalid_json", "job.tags[1]"},
		{"POST", "/v1/transactions", `{"enqueue":[{"queue":"q","kind":"k"},{"queue":"q","kind":"k","x":1}]}`, "invalid_json", "enqueue[1].x"},
		{"POST", "/v1/transactions", `{"ack":[{"id":"a","token":1,"x":1}]}`, "invalid_json", "ack[0].x"},
		{"POST", "/v1/transactions", `{"fail":[{"id":"a","token":"1","error":"e"}]}`, "invalid_json", "fail[0].token"},
		{"POST", "/v1/jobs/ack", `{"items":[{"id":"a","token":1},{"id":"b","token":1,"x":1}]}`, "invalid_json", "items[1].x"},
		{"POST", "/v1/jobs/fail", `{"items":[{"id":"a","token":1,"error":"e","retry_in_ms":"1"}]}`, "invalid_json", "items[0].retry_in_ms"},
		{"PUT", "/v1/queues/q/consumer-groups/g", `{"start":"time","from":"yesterday"}`, "invalid_json", "from"},
		{"POST", "/v1/queues/q/consumer-groups/g/seek", `{"start":"time","from":5}`, "invalid_json", "from"},
		{"POST", "/v1/fetch", `{"queues":["q",1]}`, "invalid_json", "queues[1]"},
	} {
		code, body := b.callAs("", c.method, c.path, c.body)
		wantError(t, c.method+" "+c.path+" "+c.body, code, body, 400, c.code, c.field)
	}
	out := b.must(200, "GET", "/v1/queues", nil)
	if qs := objs(out["queues"]); len(qs) != 0 {
		t.Fatalf("refused requests made queues: %v", qs)
	}
	if out := b.must(200, "GET", "/v1/schedules", nil); len(objs(out["schedules"])) != 0 {
		t.Fatalf("refused requests stored schedules: %v", out)
	}
}
