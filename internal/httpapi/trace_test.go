package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// wireTrace is a valid W3C traceparent.
const wireTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A traceparent goes in with an enqueue, a batch, a transaction or a
// schedule's template, and out with the job, its consumer groups' copies
// and its dead-letter copy; a bad one is refused naming the field. A
// fetch's worker is what the job shows, while active and after.
func TestTraceParentAndWorkerOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	type wireJob struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		Worker      string `json:"worker"`
		TraceParent string `json:"traceparent"`
		Lease       struct {
			Token int64 `json:"token"`
		} `json:"lease"`
	}
	getJob := func(id string) (wireJob, string) {
		t.Helper()
		rec := send(a, "GET", "/v1/jobs/"+id, "")
		var j wireJob
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &j) != nil {
			t.Fatalf("get %s: %d %s", id, rec.Code, rec.Body)
		}
		return j, rec.Body.String()
	}
	created := func(rec interface{ Result() *http.Response }, body string) string {
		t.Helper()
		var out struct {
			ID   string `json:"id"`
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			Job struct {
				ID string `json:"id"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || rec.Result().StatusCode >= 300 {
			t.Fatalf("answer %d %s", rec.Result().StatusCode, body)
		}
		switch {
		case out.ID != "":
			return out.ID
		case len(out.Jobs) > 0:
			return out.Jobs[0].ID
		}
		return out.Job.ID
	}
	post := func(method, target, body string) string {
		t.Helper()
		rec := send(a, method, target, body)
		return created(rec, rec.Body.String())
	}

	if rec := send(a, "PUT", "/v1/queues/orders/settings", `{"dead_letter_queue":"orders-dlq"}`); rec.Code != http.StatusOK {
		t.Fatalf("settings: %d %s", rec.Code, rec.Body)
	}
	if rec := send(a, "PUT", "/v1/queues/orders/consumer-groups/audit", `{"start":"new"}`); rec.Code != http.StatusCreated {
		t.Fatalf("consumer group: %d %s", rec.Code, rec.Body)
	}
	single := post("POST", "/v1/jobs", `{"queue":"orders","kind":"k","max_attempts":1,"traceparent":"`+wireTrace+`"}`)
	batch := post("POST", "/v1/jobs/batch", `{"jobs":[{"queue":"b","kind":"k","traceparent":"`+wireTrace+`"}]}`)
	tx := post("POST", "/v1/transactions", `{"enqueue":[{"queue":"b","kind":"k","traceparent":"`+wireTrace+`"}]}`)
	post("PUT", "/v1/schedules/traced", `{"every_ms":3600000,"job":{"queue":"s","kind":"k","traceparent":"`+wireTrace+`"}}`)
	fired := post("POST", "/v1/schedules/traced/trigger", "")
	plain := post("POST", "/v1/jobs", `{"queue":"b","kind":"k"}`)
	for _, id := range []string{single, batch, tx, fired, single + "@audit"} {
		if j, body := getJob(id); j.TraceParent != wireTrace || strings.Contains(body, `"worker"`) {
			t.Errorf("job %s: %s", id, body)
		}
	}
	if _, body := getJob(plain); strings.Contains(body, "traceparent") {
		t.Errorf("a job without a traceparent shows one: %s", body)
	}

	rec := send(a, "POST", "/v1/fetch", `{"queues":["orders"],"worker":"host-1/pid-77"}`)
	var f struct {
		Jobs []wireJob `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &f); err != nil || len(f.Jobs) != 1 || f.Jobs[0].Worker != "host-1/pid-77" {
		t.Fatalf("fetch: %s", rec.Body)
	}
	if j, body := getJob(single); j.State != "active" || j.Worker != "host-1/pid-77" {
		t.Fatalf("the fetched job: %s", body)
	}
	if rec := send(a, "POST", "/v1/jobs/"+single+"/fail", `{"token":`+jsonInt(f.Jobs[0].Lease.Token)+`,"error":"boom"}`); rec.Code != http.StatusOK {
		t.Fatalf("fail: %d %s", rec.Code, rec.Body)
	}
	if j, body := getJob(single); j.State != "dead" || j.Worker != "host-1/pid-77" {
		t.Fatalf("the dead job: %s", body)
	}
	rec = send(a, "GET", "/v1/jobs?queue=orders-dlq", "")
	var letters struct {
		Jobs []wireJob `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &letters); err != nil || len(letters.Jobs) != 1 ||
		letters.Jobs[0].TraceParent != wireTrace || letters.Jobs[0].Worker != "" {
		t.Fatalf("the dead-letter copy: %s", rec.Body)
	}

	for _, body := range []string{
		`{"kind":"k","traceparent":""}`,
		`{"kind":"k","traceparent":"` + strings.ToUpper(wireTrace) + `"}`,
		`{"kind":"k","traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`,
		`{"kind":"k","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}`,
	} {
		rec := send(a, "POST", "/v1/jobs", body)
		var e errorBody
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || rec.Code != http.StatusBadRequest || e.Error.Code != CodeInvalidArgument ||
			e.Error.Field != "traceparent" {
			t.Errorf("%s: %d %s, want 400 invalid_argument naming traceparent", body, rec.Code, rec.Body)
		}
	}
	rec = send(a, "POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","traceparent":"x"}]}`)
	if !strings.Contains(rec.Body.String(), `"field":"jobs[1].traceparent"`) {
		t.Errorf("a batch with a bad traceparent: %d %s", rec.Code, rec.Body)
	}
	rec = send(a, "PUT", "/v1/schedules/bad", `{"every_ms":3600000,"job":{"kind":"k","traceparent":"x"}}`)
	if !strings.Contains(rec.Body.String(), `"field":"job.traceparent"`) {
		t.Errorf("a schedule with a bad traceparent: %d %s", rec.Code, rec.Body)
	}
}
