package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// send serves one request on a and returns the answer.
func send(a *API, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}

// answerField decodes a JSON object answer and returns one of its fields.
func answerField(t *testing.T, rec *httptest.ResponseRecorder, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %s", rec.Code, rec.Body)
	}
	return m[name]
}

// Every level is accepted, stored and shown on the job; a job without one
// takes its queue's, and a queue's level changes only later jobs.
func TestDurabilityOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	enqueue := func(body string) string {
		t.Helper()
		rec := send(a, "POST", "/v1/jobs", body)
		if rec.Code != http.StatusCreated {
			t.Fatalf("enqueue %s: %d %s", body, rec.Code, rec.Body)
		}
		return answerField(t, rec, "id").(string)
	}
	durabilityOf := func(id string) any {
		t.Helper()
		rec := send(a, "GET", "/v1/jobs/"+id, "")
		if rec.Code != http.StatusOK {
			t.Fatalf("get %s: %d %s", id, rec.Code, rec.Body)
		}
		return answerField(t, rec, "durability")
	}
	for _, level := range []string{"full", "process", "memory"} {
		id := enqueue(`{"queue":"d","kind":"k","durability":"` + level + `"}`)
		if got := durabilityOf(id); got != level {
			t.Errorf("job enqueued with %s: durability %v", level, got)
		}
	}
	before := enqueue(`{"queue":"d","kind":"k"}`)
	if got := durabilityOf(before); got != "full" {
		t.Errorf("job enqueued without a level: durability %v, want full", got)
	}
	if got := answerField(t, send(a, "GET", "/v1/queues/d", ""), "durability"); got != "full" {
		t.Errorf("new queue: durability %v, want full", got)
	}

	rec := send(a, "POST", "/v1/queues/d/durability", `{"durability":"process"}`)
	if rec.Code != http.StatusOK || answerField(t, rec, "durability") != "process" || answerField(t, rec, "name") != "d" {
		t.Fatalf("set queue durability: %d %s", rec.Code, rec.Body)
	}
	after := enqueue(`{"queue":"d","kind":"k"}`)
	if got := durabilityOf(after); got != "process" {
		t.Errorf("job enqueued after the queue went to process: durability %v", got)
	}
	if got := durabilityOf(before); got != "full" {
		t.Errorf("job enqueued before the queue went to process: durability %v, want full", got)
	}
	if got := durabilityOf(enqueue(`{"queue":"d","kind":"k","durability":"full"}`)); got != "full" {
		t.Errorf("job naming full in a process queue: durability %v", got)
	}

	// An unknown queue is created, as pause does.
	rec = send(a, "POST", "/v1/queues/fresh/durability", `{"durability":"memory"}`)
	if rec.Code != http.StatusOK || answerField(t, rec, "durability") != "memory" {
		t.Fatalf("set durability of an unknown queue: %d %s", rec.Code, rec.Body)
	}
	rec = send(a, "GET", "/v1/queues", "")
	if !strings.Contains(rec.Body.String(), `"name":"fresh","paused":false,"durability":"memory"`) {
		t.Errorf("queue list lacks the new queue's level: %s", rec.Body)
	}
}

// A level outside the three, an empty one, a missing one and a batch
// mixing memory with other levels are refused naming the field.
func TestDurabilityRefused(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, tc := range []struct {
		path, body string
		code       Code
		field      string
	}{
		{"/v1/jobs", `{"kind":"k","durability":"disk"}`, CodeInvalidArgument, "durability"},
		{"/v1/jobs", `{"kind":"k","durability":""}`, CodeInvalidArgument, "durability"},
		{"/v1/jobs", `{"kind":"k","durability":"FULL"}`, CodeInvalidArgument, "durability"},
		{"/v1/jobs", `{"kind":"k","durability":1}`, CodeInvalidJSON, "durability"},
		{"/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","durability":"disk"}]}`, CodeInvalidArgument, "jobs[1].durability"},
		{"/v1/jobs/batch", `{"jobs":[{"kind":"k","durability":"memory"},{"kind":"k","durability":"full"}]}`, CodeInvalidArgument, "jobs"},
		{"/v1/jobs/batch", `{"jobs":[{"kind":"k","durability":"memory"},{"kind":"k"}]}`, CodeInvalidArgument, "jobs"},
		{"/v1/queues/q/durability", `{"durability":"disk"}`, CodeInvalidArgument, "durability"},
		{"/v1/queues/q/durability", `{"durability":""}`, CodeInvalidArgument, "durability"},
		{"/v1/queues/q/durability", `{}`, CodeInvalidArgument, "durability"},
		{"/v1/queues/q/durability", ``, CodeInvalidJSON, ""},
		{"/v1/queues/q/durability", `{"durability":null}`, CodeInvalidJSON, "durability"},
		{"/v1/queues/q/durability", `{"durability":"full","paused":true}`, CodeInvalidJSON, ""},
	} {
		rec := send(a, "POST", tc.path, tc.body)
		var body errorBody
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != Catalog[tc.code] || body.Error.Code != tc.code || (tc.field != "" && body.Error.Field != tc.field) {
			t.Errorf("POST %s %s: %d %s, want %s naming %q", tc.path, tc.body, rec.Code, rec.Body, tc.code, tc.field)
		}
	}
	if rec := send(a, "GET", "/v1/jobs", ""); strings.Contains(rec.Body.String(), `"id"`) {
		t.Errorf("refused calls stored jobs: %s", rec.Body)
	}
	if rec := send(a, "GET", "/v1/queues/q", ""); rec.Code != http.StatusNotFound {
		t.Errorf("refused calls created queue q: %d %s", rec.Code, rec.Body)
	}
}

// Fetches that span both tiers hand out memory jobs first; listings show
// the durable jobs, then the memory ones; every job answer names its level.
func TestDurabilityTiersInAnswers(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, body := range []string{
		`{"id":"durable","queue":"t","kind":"k","priority":10}`,
		`{"id":"volatile","queue":"t","kind":"k","durability":"memory"}`,
	} {
		if rec := send(a, "POST", "/v1/jobs", body); rec.Code != http.StatusCreated {
			t.Fatalf("enqueue %s: %d %s", body, rec.Code, rec.Body)
		}
	}
	var list struct {
		Jobs []struct {
			ID         string `json:"id"`
			Durability string `json:"durability"`
		} `json:"jobs"`
	}
	rec := send(a, "GET", "/v1/jobs?queue=t", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Jobs) != 2 {
		t.Fatalf("listing: %d %s", rec.Code, rec.Body)
	}
	if list.Jobs[0].ID != "durable" || list.Jobs[0].Durability != "full" || list.Jobs[1].ID != "volatile" || list.Jobs[1].Durability != "memory" {
		t.Errorf("listing %+v, want the full job, then the memory one", list.Jobs)
	}
	rec = send(a, "POST", "/v1/fetch", `{"queues":["t"],"max":2}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Jobs) != 2 {
		t.Fatalf("fetch: %d %s", rec.Code, rec.Body)
	}
	if list.Jobs[0].ID != "volatile" || list.Jobs[1].ID != "durable" {
		t.Errorf("fetch handed out %+v, want the memory job first despite its lower priority", list.Jobs)
	}
	if got := answerField(t, send(a, "GET", "/v1/queues/t", ""), "counts").(map[string]any)["active"]; got != 2.0 {
		t.Errorf("queue counts both tiers: active %v, want 2", got)
	}
}
