package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/httpapi/auth"
)

// GET /v1/workers lists the workers seen fetching, by name, with what
// each holds, and GET /v1/jobs?state=active&worker= lists that; a token
// limited to namespaces may list a worker's jobs in its queues, but not
// the workers.
func TestWorkersOnTheWire(t *testing.T) {
	t.Parallel()
	f := newAuthFixture(t, nil)
	admin := "Bearer " + secretOf(auth.RoleAdmin, false)
	call := func(method, path, body, authz string, want int) string {
		t.Helper()
		rec := f.do(method, path, body, authz)
		if rec.Code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, want)
		}
		return rec.Body.String()
	}
	q := f.queue(true)
	for range 3 {
		f.enqueue(q, 0)
	}
	call("POST", "/v1/fetch", `{"queues":["`+q+`"],"max":2,"worker":"zed/1"}`, admin, http.StatusOK)
	call("POST", "/v1/fetch", `{"queues":["`+q+`"],"max":2,"worker":"amy/1"}`, admin, http.StatusOK)
	call("POST", "/v1/fetch", `{"queues":["`+q+`"],"max":2}`, admin, http.StatusOK)

	var list workersJSON
	body := call("GET", "/v1/workers", "", "Bearer "+secretOf(auth.RoleReadOnly, false), http.StatusOK)
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Workers) != 2 {
		t.Fatalf("workers: %s", body)
	}
	amy, zed := list.Workers[0], list.Workers[1]
	if amy.Name != "amy/1" || amy.Active != 1 || zed.Name != "zed/1" || zed.Active != 2 ||
		zed.FirstSeenAt.IsZero() || zed.LastSeenAt.Before(zed.FirstSeenAt) {
		t.Fatalf("workers: %s", body)
	}
	for _, want := range []string{`"first_seen_at":`, `"last_seen_at":`, `"active":2`} {
		if !strings.Contains(body, want) {
			t.Fatalf("workers lack %s: %s", want, body)
		}
	}

	limited := "Bearer " + secretOf(auth.RoleReadOnly, true)
	var page struct {
		Jobs []struct {
			Worker string `json:"worker"`
			State  string `json:"state"`
		} `json:"jobs"`
	}
	body = call("GET", "/v1/jobs?queue="+q+"&state=active&worker=zed%2F1", "", limited, http.StatusOK)
	if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Jobs) != 2 || page.Jobs[0].Worker != "zed/1" {
		t.Fatalf("the jobs of zed/1: %s", body)
	}
	var e errorBody
	body = call("GET", "/v1/workers", "", limited, http.StatusForbidden)
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != CodeForbidden {
		t.Fatalf("workers to a limited token: %s", body)
	}
	for _, query := range []string{"worker=zed%2F1", "state=completed&worker=zed%2F1", "state=active&worker=",
		"state=active&worker=" + strings.Repeat("w", 257)} {
		body := call("GET", "/v1/jobs?"+query, "", admin, http.StatusBadRequest)
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != CodeInvalidArgument || e.Error.Field != "worker" {
			t.Errorf("GET /v1/jobs?%s: %s, want invalid_argument naming worker", query, body)
		}
	}
}
