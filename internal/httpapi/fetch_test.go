package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fetchJobs fetches with body and returns the jobs answered.
func fetchJobs(t *testing.T, a *API, body string) []map[string]any {
	t.Helper()
	rec := send(a, "POST", "/v1/fetch", body)
	var out struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("fetch %s: %d %s", body, rec.Code, rec.Body)
	}
	return out.Jobs
}

// A fetch with a group hands out the jobs of that group alone, in claim
// order, and never a job without a group; a bad group is refused naming
// the field.
func TestFetchGroupOnTheWire(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, body := range []string{
		`{"queue":"q","kind":"k","group":"a","payload":1}`,
		`{"queue":"q","kind":"k","group":"b","payload":2}`,
		`{"queue":"q","kind":"k","payload":3}`,
		`{"queue":"q","kind":"k","group":"a","payload":4,"priority":5}`,
		`{"queue":"q","kind":"k","group":"a","payload":5}`,
	} {
		if rec := send(a, "POST", "/v1/jobs", body); rec.Code != http.StatusCreated {
			t.Fatalf("enqueue %s: %d %s", body, rec.Code, rec.Body)
		}
	}
	var got []string
	for _, j := range fetchJobs(t, a, `{"queues":["q"],"max":10,"group":"a"}`) {
		if j["group"] != "a" {
			t.Fatalf("a fetch of group a got %v", j)
		}
		raw, _ := json.Marshal(j["payload"])
		got = append(got, string(raw))
	}
	if strings.Join(got, ",") != "4,1,5" {
		t.Fatalf("a fetch of group a got payloads %v, want 4,1,5 (priority, then enqueue order)", got)
	}
	if js := fetchJobs(t, a, `{"queues":["q"],"max":10,"group":"a"}`); len(js) != 0 {
		t.Fatalf("a second fetch of group a got %v", js)
	}
	if js := fetchJobs(t, a, `{"queues":["q","other"],"max":10,"group":"nobody"}`); len(js) != 0 {
		t.Fatalf("a fetch of a group without jobs got %v", js)
	}
	for _, c := range []struct{ body, code, field string }{
		{`{"queues":["q"],"group":""}`, "invalid_argument", "group"},
		{`{"queues":["q"],"group":"a\u0000b"}`, "invalid_argument", "group"},
		{`{"queues":["q"],"group":"` + strings.Repeat("g", 257) + `"}`, "invalid_argument", "group"},
		{`{"queues":["q"],"group":"\ud800"}`, "invalid_argument", "group"},
		{`{"queues":["q"],"group":7}`, "invalid_json", "group"},
	} {
		wantErrorRec(t, c.body, send(a, "POST", "/v1/fetch", c.body), http.StatusBadRequest, Code(c.code), c.field)
	}
	// The jobs of the other groups, and those without one, are still
	// there for a fetch without a group.
	if js := fetchJobs(t, a, `{"queues":["q"],"max":10}`); len(js) != 2 {
		t.Fatalf("a fetch without a group got %d jobs, want the 2 left", len(js))
	}
}

// A long poll of one group over a stream stays parked while jobs of other
// groups are enqueued, and returns the job of its group as soon as one is
// enqueued.
func TestFetchGroupLongPollWakesForItsGroup(t *testing.T) {
	t.Parallel()
	b := newStreamBundle(t, Options{})
	c := b.dial("")
	type answer struct {
		status int
		jobs   []map[string]any
	}
	got := make(chan answer, 1)
	go func() {
		ctx, cancel := b.step()
		defer cancel()
		ans, err := c.Do(ctx, "POST", "/v1/fetch", []byte(`{"queues":["q"],"group":"tenant-7","wait_ms":10000}`))
		if err != nil {
			t.Errorf("fetch over the stream: %v", err)
			got <- answer{}
			return
		}
		var out struct {
			Jobs []map[string]any `json:"jobs"`
		}
		if err := json.Unmarshal(ans.Body, &out); err != nil {
			t.Errorf("fetch answer %q: %v", ans.Body, err)
		}
		got <- answer{status: ans.Status, jobs: out.Jobs}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for b.a.engine.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the fetch did not park")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, body := range []string{`{"queue":"q","kind":"k","group":"tenant-8"}`, `{"queue":"q","kind":"k"}`} {
		if status, data := b.http("POST", "/v1/jobs", body, ""); status != http.StatusCreated {
			t.Fatalf("enqueue %s: %d %s", body, status, data)
		}
	}
	select {
	case ans := <-got:
		t.Fatalf("the fetch of tenant-7 returned %d %v after jobs of other groups came", ans.status, ans.jobs)
	case <-time.After(200 * time.Millisecond):
	}
	if b.a.engine.Waiting() != 1 {
		t.Fatalf("%d fetches parked after jobs of other groups came, want the fetch of tenant-7 parked again", b.a.engine.Waiting())
	}
	start := time.Now()
	status, data := b.http("POST", "/v1/jobs", `{"queue":"q","kind":"k","group":"tenant-7"}`, "")
	if status != http.StatusCreated {
		t.Fatalf("enqueue into tenant-7: %d %s", status, data)
	}
	id := decode(t, data)["id"]
	select {
	case ans := <-got:
		if ans.status != http.StatusOK || len(ans.jobs) != 1 || ans.jobs[0]["id"] != id || ans.jobs[0]["group"] != "tenant-7" {
			t.Fatalf("the fetch of tenant-7 got %d %v, want job %v", ans.status, ans.jobs, id)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("the fetch woke %v after the enqueue", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fetch of tenant-7 never woke")
	}
}
