package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Settings are set, shown with the queue and in the list, replaced and
// cleared over the wire; bad ones are refused naming the field, and
// change nothing.
func TestSettingsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	body := `{"dead_letter_queue":"orders-dlq","max_wait_ms":60000,"default_lease_ms":300000,"default_max_attempts":3,"default_delay_ms":10000}`
	rec := send(a, "PUT", "/v1/queues/orders/settings", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("put settings: %d %s", rec.Code, rec.Body)
	}
	var got struct {
		Settings json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || compactJSON(t, got.Settings) != compactJSON(t, []byte(body)) {
		t.Fatalf("queue answered %s, want settings %s", rec.Body, body)
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues/orders", "").Body.Bytes(), &got); err != nil ||
		compactJSON(t, got.Settings) != compactJSON(t, []byte(body)) {
		t.Fatalf("queue settings %s, want %s", got.Settings, body)
	}
	var list struct {
		Queues []struct {
			Name     string          `json:"name"`
			Settings json.RawMessage `json:"settings"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues", "").Body.Bytes(), &list); err != nil || len(list.Queues) != 1 ||
		compactJSON(t, list.Queues[0].Settings) != compactJSON(t, []byte(body)) {
		t.Fatalf("queue list %+v, %v", list, err)
	}
	for _, c := range []struct {
		body  string
		code  Code
		field string
	}{
		{`{"dead_letter_queue":"orders"}`, "invalid_argument", "dead_letter_queue"},
		{`{"dead_letter_queue":""}`, "invalid_argument", "dead_letter_queue"},
		{`{"dead_letter_queue":"bad name"}`, "invalid_argument", "dead_letter_queue"},
		{`{"dead_letter_queue":"` + strings.Repeat("q", 129) + `"}`, "invalid_argument", "dead_letter_queue"},
		{`{"max_wait_ms":0}`, "invalid_argument", "max_wait_ms"},
		{`{"max_wait_ms":-1}`, "invalid_argument", "max_wait_ms"},
		{`{"max_wait_ms":31536000001}`, "invalid_argument", "max_wait_ms"},
		{`{"max_wait_ms":9223372036854775807}`, "invalid_argument", "max_wait_ms"},
		{`{"max_wait_ms":1.5}`, "invalid_json", "max_wait_ms"},
		{`{"max_wait_ms":"60000"}`, "invalid_json", "max_wait_ms"},
		{`{"max_wait_ms":null}`, "invalid_json", "max_wait_ms"},
		{`{"dead_letter_queue":null}`, "invalid_json", "dead_letter_queue"},
		{`{"max_wait_ms":1000,"ordered":true}`, "invalid_json", "ordered"},
		{`{"default_lease_ms":0}`, "invalid_argument", "default_lease_ms"},
		{`{"default_lease_ms":99}`, "invalid_argument", "default_lease_ms"},
		{`{"default_lease_ms":86400001}`, "invalid_argument", "default_lease_ms"},
		{`{"default_lease_ms":9223372036854775807}`, "invalid_argument", "default_lease_ms"},
		{`{"default_lease_ms":null}`, "invalid_json", "default_lease_ms"},
		{`{"default_max_attempts":0}`, "invalid_argument", "default_max_attempts"},
		{`{"default_max_attempts":-1}`, "invalid_argument", "default_max_attempts"},
		{`{"default_max_attempts":1001}`, "invalid_argument", "default_max_attempts"},
		{`{"default_max_attempts":2.5}`, "invalid_json", "default_max_attempts"},
		{`{"default_delay_ms":0}`, "invalid_argument", "default_delay_ms"},
		{`{"default_delay_ms":-5}`, "invalid_argument", "default_delay_ms"},
		{`{"default_delay_ms":31536000001}`, "invalid_argument", "default_delay_ms"},
		{`{"default_delay_ms":"10s"}`, "invalid_json", "default_delay_ms"},
	} {
		rec := send(a, "PUT", "/v1/queues/orders/settings", c.body)
		wantErrorRec(t, c.body, rec, http.StatusBadRequest, c.code, c.field)
	}
	if rec := send(a, "PUT", "/v1/queues/bad%20name/settings", `{"max_wait_ms":1}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("settings of a bad queue name: %d %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(send(a, "GET", "/v1/queues/orders", "").Body.Bytes(), &got); err != nil ||
		compactJSON(t, got.Settings) != compactJSON(t, []byte(body)) {
		t.Fatalf("refused puts changed the settings: %s", got.Settings)
	}
	// A put replaces the settings as a whole; {} and DELETE clear them.
	rec = send(a, "PUT", "/v1/queues/orders/settings", `{"max_wait_ms":1}`)
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "dead_letter_queue") {
		t.Fatalf("replace settings: %d %s", rec.Code, rec.Body)
	}
	if rec := send(a, "PUT", "/v1/queues/orders/settings", `{}`); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"settings"`) {
		t.Fatalf("put {}: %d %s", rec.Code, rec.Body)
	}
	send(a, "PUT", "/v1/queues/orders/settings", body)
	if rec := send(a, "DELETE", "/v1/queues/orders/settings", ""); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"settings"`) {
		t.Fatalf("clear settings: %d %s", rec.Code, rec.Body)
	}
	// Settings create a queue, as a pause does.
	if rec := send(a, "DELETE", "/v1/queues/fresh/settings", ""); rec.Code != http.StatusOK || answerField(t, rec, "name") != "fresh" {
		t.Fatalf("clear settings of an unknown queue: %d %s", rec.Code, rec.Body)
	}
}

// A job enqueued without a lease, maximum attempts or delay takes its
// queue's defaults; one that names them keeps its own.
func TestJobDefaultsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	send(a, "PUT", "/v1/queues/orders/settings", `{"default_lease_ms":300000,"default_max_attempts":3,"default_delay_ms":60000}`)
	rec := send(a, "POST", "/v1/jobs", `{"queue":"orders","kind":"k"}`)
	if rec.Code != http.StatusCreated || answerField(t, rec, "state") != "scheduled" {
		t.Fatalf("enqueue: %d %s", rec.Code, rec.Body)
	}
	j := send(a, "GET", "/v1/jobs/"+answerField(t, rec, "id").(string), "")
	if answerField(t, j, "lease_ms") != 300000.0 || answerField(t, j, "max_attempts") != 3.0 || answerField(t, j, "state") != "scheduled" {
		t.Fatalf("job with the queue's defaults: %s", j.Body)
	}
	rec = send(a, "POST", "/v1/jobs/batch", `{"jobs":[{"queue":"orders","kind":"k","lease_ms":1000,"max_attempts":7,"delay_ms":5}]}`)
	var batch struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &batch); err != nil || len(batch.Jobs) != 1 {
		t.Fatalf("batch: %d %s", rec.Code, rec.Body)
	}
	j = send(a, "GET", "/v1/jobs/"+batch.Jobs[0].ID, "")
	if answerField(t, j, "lease_ms") != 1000.0 || answerField(t, j, "max_attempts") != 7.0 {
		t.Fatalf("job with its own values: %s", j.Body)
	}
}

// A job that dies into a dead-letter queue shows there with its history
// and dead_letter_of; a job past its wait is never handed out.
func TestDeadLetterOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	send(a, "PUT", "/v1/queues/orders/settings", `{"dead_letter_queue":"orders-dlq"}`)
	rec := send(a, "POST", "/v1/jobs", `{"queue":"orders","kind":"charge","payload":{"n":1},"max_attempts":1}`)
	id := answerField(t, rec, "id").(string)
	j := fetchOne(t, a, `{"queues":["orders"]}`)
	if rec := send(a, "POST", "/v1/jobs/"+id+"/fail", `{"token":`+tokenText(j)+`,"error":"boom"}`); answerField(t, rec, "state") != "dead" {
		t.Fatalf("fail: %d %s", rec.Code, rec.Body)
	}
	c := fetchOne(t, a, `{"queues":["orders-dlq"]}`)
	of, _ := c["dead_letter_of"].(map[string]any)
	errs, _ := c["errors"].([]any)
	if c == nil || c["id"] == id || of["queue"] != "orders" || of["id"] != id || len(errs) != 1 || c["kind"] != "charge" {
		t.Fatalf("dead-letter copy %v", c)
	}
	if rec := send(a, "GET", "/v1/jobs/"+id, ""); strings.Contains(rec.Body.String(), "dead_letter_of") {
		t.Fatalf("the dead original names a dead job: %s", rec.Body)
	}

	send(a, "PUT", "/v1/queues/late/settings", `{"max_wait_ms":1}`)
	rec = send(a, "POST", "/v1/jobs", `{"queue":"late","kind":"k"}`)
	late := answerField(t, rec, "id").(string)
	time.Sleep(5 * time.Millisecond)
	if j := fetchOne(t, a, `{"queues":["late"]}`); j != nil {
		t.Fatalf("fetch handed out a job past its wait: %v", j)
	}
	if st := answerField(t, send(a, "GET", "/v1/jobs/"+late, ""), "state"); st != "dead" {
		t.Fatalf("job past its wait is %v, want dead", st)
	}
}
