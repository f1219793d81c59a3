package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Limits are set, shown with the queue, replaced and cleared over the
// wire; bad ones are refused naming the field, and change nothing.
func TestLimitsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	body := `{"rate":{"limit":100,"period_ms":60000},"max_active":7,"group_rate":{"limit":3,"period_ms":1500},"group_max_active":2}`
	rec := send(a, "PUT", "/v1/queues/q/limits", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("put limits: %d %s", rec.Code, rec.Body)
	}
	var got struct {
		Limits json.RawMessage `json:"limits"`
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues/q", "").Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if compactJSON(t, got.Limits) != compactJSON(t, []byte(body)) {
		t.Fatalf("queue limits %s, want %s", got.Limits, body)
	}
	for _, c := range []struct {
		body  string
		code  Code
		field string
	}{
		{`{"max_active":0}`, "invalid_argument", "max_active"},
		{`{"max_active":-1}`, "invalid_argument", "max_active"},
		{`{"group_max_active":0}`, "invalid_argument", "group_max_active"},
		{`{"rate":{"limit":0,"period_ms":1000}}`, "invalid_argument", "rate.limit"},
		{`{"rate":{"period_ms":1000}}`, "invalid_argument", "rate.limit"},
		{`{"rate":{"limit":5}}`, "invalid_argument", "rate.period_ms"},
		{`{"rate":{"limit":5,"period_ms":0}}`, "invalid_argument", "rate.period_ms"},
		{`{"group_rate":{"limit":5,"period_ms":-3}}`, "invalid_argument", "group_rate.period_ms"},
		{`{"group_rate":{"limit":200000,"period_ms":1000}}`, "invalid_argument", "group_rate.limit"},
		{`{"rate":{"limit":5,"period_ms":90000000}}`, "invalid_argument", "rate.period_ms"},
		{`{"max_active":2,"bogus":1}`, "invalid_json", "bogus"},
		{`{"rate":{"limit":5,"period_ms":10,"burst":2}}`, "invalid_json", "rate.burst"},
		{`{"ordered":true,"group_max_active":2}`, "invalid_argument", "group_max_active"},
		{`{"ordered":1}`, "invalid_json", "ordered"},
	} {
		rec := send(a, "PUT", "/v1/queues/q/limits", c.body)
		wantErrorRec(t, c.body, rec, http.StatusBadRequest, c.code, c.field)
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues/q", "").Body.Bytes(), &got); err != nil || compactJSON(t, got.Limits) != compactJSON(t, []byte(body)) {
		t.Fatalf("refused puts changed the limits: %s", got.Limits)
	}
	if rec := send(a, "DELETE", "/v1/queues/q/limits", ""); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"limits"`) {
		t.Fatalf("clear limits: %d %s", rec.Code, rec.Body)
	}
	// An ordered queue runs each group one job at a time: the server sets
	// its group cap to 1.
	if rec := send(a, "PUT", "/v1/queues/o/limits", `{"ordered":true,"max_active":3}`); rec.Code != http.StatusOK {
		t.Fatalf("put ordered: %d %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues/o", "").Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := `{"max_active":3,"group_max_active":1,"ordered":true}`; compactJSON(t, got.Limits) != compactJSON(t, []byte(want)) {
		t.Fatalf("ordered queue's limits %s, want %s", got.Limits, want)
	}
}

// A job's group is kept and shown; an empty group or one with a NUL is
// refused naming the field.
func TestGroupOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	rec := send(a, "POST", "/v1/jobs", `{"queue":"q","kind":"k","group":"tenant-42"}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", rec.Code, rec.Body)
	}
	id := answerField(t, rec, "id").(string)
	if g := answerField(t, send(a, "GET", "/v1/jobs/"+id, ""), "group"); g != "tenant-42" {
		t.Fatalf("job group %v", g)
	}
	rec = send(a, "POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","group":"a"},{"kind":"k","group":"b \u00e9"}]}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("batch: %d %s", rec.Code, rec.Body)
	}
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","group":""}`, "group"},
		{`{"kind":"k","group":"a\u0000b"}`, "group"},
		{`{"kind":"k","group":"` + strings.Repeat("g", 257) + `"}`, "group"},
	} {
		wantErrorRec(t, c.body, send(a, "POST", "/v1/jobs", c.body), http.StatusBadRequest, "invalid_argument", c.field)
	}
}

// A fetch parked on a queue at its active cap wakes at once when a job of
// the queue is acknowledged.
func TestParkedFetchWakesWhenACapFrees(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for range 2 {
		send(a, "POST", "/v1/jobs", `{"queue":"capped","kind":"k"}`)
	}
	send(a, "PUT", "/v1/queues/capped/limits", `{"max_active":1}`)
	first := fetchOne(t, a, `{"queues":["capped"]}`)
	got := make(chan map[string]any, 1)
	go func() { got <- fetchOne(t, a, `{"queues":["capped"],"wait_ms":10000}`) }()
	deadline := time.Now().Add(5 * time.Second)
	for a.engine.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second fetch did not park")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	ack := send(a, "POST", "/v1/jobs/"+first["id"].(string)+"/ack", `{"token":`+tokenText(first)+`}`)
	if ack.Code != http.StatusOK {
		t.Fatalf("ack: %d %s", ack.Code, ack.Body)
	}
	select {
	case j := <-got:
		if j == nil {
			t.Fatal("the parked fetch got nothing")
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("the parked fetch woke %v after the ack", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked fetch never woke")
	}
}

// A fetch parked on a queue held back by its rate wakes when the rate
// lets the next job start, not before and not a poll interval later.
func TestParkedFetchWakesWhenTheRateAllows(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for range 2 {
		send(a, "POST", "/v1/jobs", `{"queue":"slow","kind":"k"}`)
	}
	send(a, "PUT", "/v1/queues/slow/limits", `{"rate":{"limit":1,"period_ms":400}}`)
	start := time.Now()
	fetchOne(t, a, `{"queues":["slow"]}`)
	if j := fetchOne(t, a, `{"queues":["slow"],"wait_ms":5000}`); j == nil {
		t.Fatal("the second fetch got nothing")
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("the second job started %v after the first, want about 400ms", d)
	}
}

// fetchOne fetches with body and returns the one job, or nil.
func fetchOne(t *testing.T, a *API, body string) map[string]any {
	t.Helper()
	rec := send(a, "POST", "/v1/fetch", body)
	var out struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK {
		t.Errorf("fetch: %d %s", rec.Code, rec.Body)
		return nil
	}
	if len(out.Jobs) == 0 {
		return nil
	}
	return out.Jobs[0]
}

func tokenText(j map[string]any) string {
	raw, _ := json.Marshal(j["lease"].(map[string]any)["token"])
	return string(raw)
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// wantErrorRec fails unless rec is the catalog's error with status, code
// and field.
func wantErrorRec(t *testing.T, what string, rec *httptest.ResponseRecorder, status int, code Code, field string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != status || e.Error.Code != code || e.Error.Field != field {
		t.Errorf("%s: %d %s, want %d %s on field %q", what, rec.Code, rec.Body, status, code, field)
	}
}
