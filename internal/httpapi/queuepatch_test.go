package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// sendPatch sends a PATCH with body as contentType.
func sendPatch(a *API, path, contentType, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("PATCH", path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	a.ServeHTTP(rec, req)
	return rec
}

// queuePart is the JSON of one part ("settings", "limits") of a queue
// answer, compacted; "" when the queue has none.
func queuePart(t *testing.T, rec *httptest.ResponseRecorder, part string) string {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	if m[part] == nil {
		return ""
	}
	return compactJSON(t, m[part])
}

// canonical is JSON text as compactJSON gives it, "" for "".
func canonical(t *testing.T, text string) string {
	t.Helper()
	if text == "" {
		return ""
	}
	return compactJSON(t, []byte(text))
}

// A settings PATCH sets what it names, clears what it sends as null and
// keeps the rest, in either media type: the README's dead-letter queue
// and maximum wait survive a change of the default lease.
func TestPatchSettingsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	if rec := send(a, "PUT", "/v1/queues/emails/settings", `{"dead_letter_queue":"emails-dlq","max_wait_ms":600000}`); rec.Code != http.StatusOK {
		t.Fatalf("put settings: %d %s", rec.Code, rec.Body)
	}
	for _, step := range []struct {
		contentType, body, want string
	}{
		{"application/merge-patch+json", `{"default_lease_ms":300000}`,
			`{"dead_letter_queue":"emails-dlq","max_wait_ms":600000,"default_lease_ms":300000}`},
		{"application/json", `{"max_wait_ms":null,"default_max_attempts":3}`,
			`{"dead_letter_queue":"emails-dlq","default_lease_ms":300000,"default_max_attempts":3}`},
		{"application/merge-patch+json", `{}`,
			`{"dead_letter_queue":"emails-dlq","default_lease_ms":300000,"default_max_attempts":3}`},
		{"application/merge-patch+json", `{"dead_letter_queue":null,"default_lease_ms":null,"default_max_attempts":null}`, ``},
	} {
		got := queuePart(t, sendPatch(a, "/v1/queues/emails/settings", step.contentType, step.body), "settings")
		if got != canonical(t, step.want) {
			t.Fatalf("after %s: settings %s, want %s", step.body, got, step.want)
		}
		if got := queuePart(t, send(a, "GET", "/v1/queues/emails", ""), "settings"); got != canonical(t, step.want) {
			t.Fatalf("after %s: the queue shows %s, want %s", step.body, got, step.want)
		}
	}
	// A patch of an unknown queue creates it, as a PUT does.
	if got := queuePart(t, sendPatch(a, "/v1/queues/fresh/settings", "application/merge-patch+json", `{"default_delay_ms":1000}`), "settings"); got != `{"default_delay_ms":1000}` {
		t.Fatalf("patch of a new queue: settings %s", got)
	}
}

// A bad settings PATCH is refused naming the field and changes nothing,
// nor creates the queue it names.
func TestPatchSettingsRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	before := `{"dead_letter_queue":"orders-dlq","max_wait_ms":60000}`
	if rec := send(a, "PUT", "/v1/queues/orders/settings", before); rec.Code != http.StatusOK {
		t.Fatalf("put settings: %d %s", rec.Code, rec.Body)
	}
	for _, c := range []struct {
		body  string
		code  Code
		field string
	}{
		{`{"dead_letter_queue":"orders","default_lease_ms":300000}`, "invalid_argument", "dead_letter_queue"},
		{`{"dead_letter_queue":"","max_wait_ms":null}`, "invalid_argument", "dead_letter_queue"},
		{`{"max_wait_ms":0}`, "invalid_argument", "max_wait_ms"},
		{`{"max_wait_ms":-1}`, "invalid_argument", "max_wait_ms"},
		{`{"default_lease_ms":99,"max_wait_ms":null}`, "invalid_argument", "default_lease_ms"},
		{`{"default_max_attempts":1001}`, "invalid_argument", "default_max_attempts"},
		{`{"default_delay_ms":9223372036854775807}`, "invalid_argument", "default_delay_ms"},
		{`{"max_wait_ms":"60000"}`, "invalid_json", "max_wait_ms"},
		{`{"default_max_attempts":2.5}`, "invalid_json", "default_max_attempts"},
		{`{"max_wait_ms":null,"ordered":true}`, "invalid_json", "ordered"},
		{`{"max_wait_ms":null,"max_wait_ms":null}`, "invalid_json", "max_wait_ms"},
		{`{"Max_wait_ms":null}`, "invalid_json", "Max_wait_ms"},
		{`[]`, "invalid_json", ""},
		{`null`, "invalid_json", ""},
		{``, "invalid_json", ""},
	} {
		rec := sendPatch(a, "/v1/queues/orders/settings", "application/merge-patch+json", c.body)
		wantErrorRec(t, c.body, rec, http.StatusBadRequest, c.code, c.field)
	}
	if got := queuePart(t, send(a, "GET", "/v1/queues/orders", ""), "settings"); got != canonical(t, before) {
		t.Fatalf("settings after refused patches: %s, want %s", got, before)
	}
	rec := sendPatch(a, "/v1/queues/unknown/settings", "application/merge-patch+json", `{"default_max_attempts":0}`)
	wantErrorRec(t, "patch of an unknown queue", rec, http.StatusBadRequest, "invalid_argument", "default_max_attempts")
	if rec := send(a, "GET", "/v1/queues/unknown", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("queue of a refused patch: %d %s, want 404", rec.Code, rec.Body)
	}
	if rec := sendPatch(a, "/v1/queues/bad%20name/settings", "application/merge-patch+json", `{"max_wait_ms":1}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("patch of a bad queue name: %d %s", rec.Code, rec.Body)
	}
}

// A limits PATCH sets, clears and keeps as a settings PATCH does, and
// merges a rate member by member.
func TestPatchLimitsOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	if rec := send(a, "PUT", "/v1/queues/webhooks/limits", `{"rate":{"limit":50,"period_ms":1000},"max_active":20}`); rec.Code != http.StatusOK {
		t.Fatalf("put limits: %d %s", rec.Code, rec.Body)
	}
	for _, step := range []struct {
		body, want string
	}{
		{`{"group_max_active":2}`, `{"rate":{"limit":50,"period_ms":1000},"max_active":20,"group_max_active":2}`},
		{`{"rate":{"limit":100},"max_active":null}`, `{"rate":{"limit":100,"period_ms":1000},"group_max_active":2}`},
		{`{"group_rate":{"limit":1,"period_ms":60000},"rate":null}`, `{"group_rate":{"limit":1,"period_ms":60000},"group_max_active":2}`},
		{`{"group_max_active":null,"ordered":true}`, `{"group_rate":{"limit":1,"period_ms":60000},"group_max_active":1,"ordered":true}`},
		{`{"group_rate":null,"group_max_active":null,"ordered":null}`, ``},
	} {
		got := queuePart(t, sendPatch(a, "/v1/queues/webhooks/limits", "application/merge-patch+json", step.body), "limits")
		if got != canonical(t, step.want) {
			t.Fatalf("after %s: limits %s, want %s", step.body, got, step.want)
		}
	}
}

// A bad limits PATCH is refused naming the field and changes nothing.
func TestPatchLimitsRefusedChangesNothing(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	before := `{"rate":{"limit":50,"period_ms":1000},"group_max_active":3}`
	if rec := send(a, "PUT", "/v1/queues/webhooks/limits", before); rec.Code != http.StatusOK {
		t.Fatalf("put limits: %d %s", rec.Code, rec.Body)
	}
	for _, c := range []struct {
		body  string
		code  Code
		field string
	}{
		{`{"ordered":true}`, "invalid_argument", "group_max_active"},
		{`{"rate":{"period_ms":null}}`, "invalid_argument", "rate.period_ms"},
		{`{"group_rate":{"limit":5}}`, "invalid_argument", "group_rate.period_ms"},
		{`{"group_rate":{}}`, "invalid_argument", "group_rate.limit"},
		{`{"rate":{"limit":0}}`, "invalid_argument", "rate.limit"},
		{`{"rate":{"limit":100001}}`, "invalid_argument", "rate.limit"},
		{`{"max_active":0,"rate":null}`, "invalid_argument", "max_active"},
		{`{"max_active":1000001}`, "invalid_argument", "max_active"},
		{`{"max_active":"5"}`, "invalid_json", "max_active"},
		{`{"rate":{"limit":5,"period":1}}`, "invalid_json", "rate.period"},
		{`{"rate":[1]}`, "invalid_json", "rate"},
		{`{"ordered":"yes"}`, "invalid_json", "ordered"},
		{`{"max_wait_ms":null}`, "invalid_json", "max_wait_ms"},
	} {
		rec := sendPatch(a, "/v1/queues/webhooks/limits", "application/merge-patch+json", c.body)
		wantErrorRec(t, c.body, rec, http.StatusBadRequest, c.code, c.field)
	}
	if got := queuePart(t, send(a, "GET", "/v1/queues/webhooks", ""), "limits"); got != canonical(t, before) {
		t.Fatalf("limits after refused patches: %s, want %s", got, before)
	}
}
