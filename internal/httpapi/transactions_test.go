package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// txFixture is an API and the helpers the transaction tests drive it
// with.
type txFixture struct {
	t *testing.T
	a *API
}

// leased enqueues a job into queue q with the extra enqueue fields of
// extra ("" for none), fetches it and returns its id and token.
func (f *txFixture) leased(q, extra string) (id, token string) {
	f.t.Helper()
	body := fmt.Sprintf(`{"queue":%q,"kind":"k","priority":1000%s}`, q, extra)
	if rec := send(f.a, "POST", "/v1/jobs", body); rec.Code != http.StatusCreated {
		f.t.Fatalf("enqueue %s: %d %s", body, rec.Code, rec.Body)
	}
	j := fetchOne(f.t, f.a, fmt.Sprintf(`{"queues":[%q]}`, q))
	if j == nil {
		f.t.Fatalf("fetch from %s: no job", q)
	}
	return j["id"].(string), tokenText(j)
}

// job returns the job id as the API shows it, or nil when it does not
// exist.
func (f *txFixture) job(id string) map[string]any {
	f.t.Helper()
	rec := send(f.a, "GET", "/v1/jobs/"+id, "")
	if rec.Code == http.StatusNotFound {
		return nil
	}
	var j map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || rec.Code != http.StatusOK {
		f.t.Fatalf("get %s: %d %s", id, rec.Code, rec.Body)
	}
	return j
}

// state is the state of job id, which must exist.
func (f *txFixture) state(id string) string {
	f.t.Helper()
	j := f.job(id)
	if j == nil {
		f.t.Fatalf("job %s does not exist", id)
	}
	return j["state"].(string)
}

// A transaction acks, fails and enqueues in one call and answers each item
// as its batch route does.
func TestTransactionOnTheWire(t *testing.T) {
	t.Parallel()
	f := &txFixture{t: t, a: newTestAPI(t)}
	acked, ackTok := f.leased("q", "")
	failed, failTok := f.leased("q", "")
	retried, retryTok := f.leased("q", "")
	body := fmt.Sprintf(`{"ack":[{"id":%q,"token":%s,"result":{"rows":3}}],
		"fail":[{"id":%q,"token":%s,"error":"bad","no_retry":true},{"id":%q,"token":%s,"error":"later","retry_after_ms":60000}],
		"enqueue":[{"id":"follow-up","queue":"next","kind":"k"},{"queue":"next","kind":"k","delay_ms":60000}]}`,
		acked, ackTok, failed, failTok, retried, retryTok)
	rec := send(f.a, "POST", "/v1/transactions", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("transaction: %d %s", rec.Code, rec.Body)
	}
	var out struct {
		Acked  []map[string]any `json:"acked"`
		Failed []map[string]any `json:"failed"`
		Jobs   []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Acked) != 1 || out.Acked[0]["id"] != acked || out.Acked[0]["state"] != "completed" {
		t.Fatalf("acked %v", out.Acked)
	}
	if len(out.Failed) != 2 || out.Failed[0]["state"] != "dead" || out.Failed[0]["run_at"] != nil ||
		out.Failed[1]["id"] != retried || out.Failed[1]["state"] != "retrying" || out.Failed[1]["run_at"] == nil {
		t.Fatalf("failed %v", out.Failed)
	}
	if len(out.Jobs) != 2 || out.Jobs[0]["id"] != "follow-up" || out.Jobs[0]["state"] != "available" ||
		out.Jobs[0]["duplicate"] != false || out.Jobs[1]["state"] != "scheduled" {
		t.Fatalf("jobs %v", out.Jobs)
	}
	if j := f.job(acked); j["state"] != "completed" || compactJSON(t, mustJSON(t, j["result"])) != `{"rows":3}` {
		t.Fatalf("acked job %v", j)
	}
	if s := f.state(failed); s != "dead" {
		t.Fatalf("failed job is %s", s)
	}

	// Lists left out are answered empty, and a duplicate is no error.
	rec = send(f.a, "POST", "/v1/transactions", `{"enqueue":[{"id":"follow-up","queue":"next","kind":"k"}]}`)
	if rec.Code != http.StatusOK || compactJSON(t, rec.Body.Bytes()) != `{"acked":[],"failed":[],"jobs":[{"duplicate":true,"id":"follow-up","state":"available"}]}` {
		t.Fatalf("an enqueue alone of a known id: %d %s", rec.Code, rec.Body)
	}
}

// A refused transaction is answered with the catalog's error naming the
// item at fault, and changes nothing.
func TestTransactionErrorsNameTheItem(t *testing.T) {
	t.Parallel()
	f := &txFixture{t: t, a: newTestAPI(t)}
	a, aTok := f.leased("q", "")
	b, bTok := f.leased("q", "")
	send(f.a, "POST", "/v1/jobs", `{"id":"elsewhere","queue":"other","kind":"k"}`)
	mem, memTok := f.leased("m", `,"durability":"memory"`)
	for _, c := range []struct {
		name, body string
		status     int
		code       Code
		field      string
	}{
		{"a stale token", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s},{"id":%q,"token":%s9}],"enqueue":[{"id":"new","queue":"q","kind":"k"}]}`, a, aTok, b, bTok),
			http.StatusConflict, CodeLeaseLost, "ack[1].token"},
		{"an unknown job", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"fail":[{"id":"no-such-job","token":1}],"enqueue":[{"id":"new","queue":"q","kind":"k"}]}`, a, aTok),
			http.StatusNotFound, CodeNotFound, "fail[0].id"},
		{"an id of another queue", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"enqueue":[{"id":"new","queue":"q","kind":"k"},{"id":"elsewhere","queue":"q","kind":"k"}]}`, a, aTok),
			http.StatusConflict, CodeIDTaken, "enqueue[1].id"},
		{"a job acked and failed", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"fail":[{"id":%q,"token":%s}]}`, a, aTok, a, aTok),
			http.StatusBadRequest, CodeInvalidArgument, "fail[0].id"},
		{"an item without a token", fmt.Sprintf(`{"ack":[{"id":%q}]}`, a), http.StatusBadRequest, CodeInvalidArgument, "ack[0].token"},
		{"an item without a job id", `{"fail":[{"token":1}]}`, http.StatusBadRequest, CodeInvalidArgument, "fail[0].id"},
		{"a bad job to enqueue", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"enqueue":[{"queue":"q","kind":"k"},{"queue":"q"}]}`, a, aTok),
			http.StatusBadRequest, CodeInvalidArgument, "enqueue[1].kind"},
		{"nothing", `{}`, http.StatusBadRequest, CodeInvalidArgument, ""},
		{"an unknown field", `{"acks":[]}`, http.StatusBadRequest, CodeInvalidJSON, "acks"},
		{"a memory job and a durable one", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s},{"id":%q,"token":%s}]}`, mem, memTok, a, aTok),
			http.StatusBadRequest, CodeInvalidArgument, "ack[1].id"},
		{"a memory job and a durable job to enqueue", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"enqueue":[{"id":"new","queue":"q","kind":"k"}]}`, mem, memTok),
			http.StatusBadRequest, CodeInvalidArgument, "enqueue[0].durability"},
	} {
		wantErrorRec(t, c.name, send(f.a, "POST", "/v1/transactions", c.body), c.status, c.code, c.field)
		for _, id := range []string{a, b, mem} {
			if s := f.state(id); s != "active" {
				t.Fatalf("%s: job %s is %s, want it still active", c.name, id, s)
			}
		}
		if f.job("new") != nil {
			t.Fatalf("%s: the job to enqueue was stored", c.name)
		}
	}
	// The leases still hold.
	rec := send(f.a, "POST", "/v1/transactions", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"fail":[{"id":%q,"token":%s}],"enqueue":[{"id":"new","queue":"q","kind":"k"}]}`, a, aTok, b, bTok))
	if rec.Code != http.StatusOK {
		t.Fatalf("the transaction with current tokens: %d %s", rec.Code, rec.Body)
	}
	rec = send(f.a, "POST", "/v1/transactions", fmt.Sprintf(`{"ack":[{"id":%q,"token":%s}],"enqueue":[{"queue":"m","kind":"k","durability":"memory"}]}`, mem, memTok))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"state":"completed"`) {
		t.Fatalf("a transaction of memory jobs: %d %s", rec.Code, rec.Body)
	}
}

// Each list is bounded by the server's batch limit.
func TestTransactionListsAreBounded(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	items := strings.TrimSuffix(strings.Repeat(`{"kind":"k"},`, 10_001), ",")
	wantErrorRec(t, "10,001 jobs to enqueue", send(a, "POST", "/v1/transactions", `{"enqueue":[`+items+`]}`),
		http.StatusBadRequest, CodeBatchTooLarge, "enqueue")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
